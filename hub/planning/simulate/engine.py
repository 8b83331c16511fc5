"""The simulation: the live hub's placement code and the member's own scheduler, in one process.

Called by ``fuyaoctl simulate`` (through ``run``) and by ``bench/trace_quality.py``. For every
arriving task the hub (``hub.fleet.FleetView`` + ``hub.placement.Scheduler`` with the
policy's profile) chooses a cluster and reserves; that member's ``LocalScheduler``
(``fuyao.nodescheduler``, the sim member's scheduler) binds it to nodes with the selector
the hub sends it (``hub.activetask.member_selector``: the fit's model pinned); the member's
changed nodes go back to the hub as a delta and the hub releases its reservation - what the
agent channel and the placement loop do. No processes, no network, no store.

Protocol (the FGD paper's): tasks arrive one by one in the given order and never leave,
until the arrived GPU demand passes ``until`` % of the fleet's GPU capacity (+0.5, so that
percent's bin is whole). With ``durations`` a simulated clock runs: each task arrives at
its time and leaves its duration after being placed (event-driven; nothing sleeps). A task
no cluster takes is dropped, as in FGD. The metric is the FGD analysis': GPU milli
allocated / total after each arrival, averaged over the arrivals whose arrived demand
rounds to each whole percent.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from fuyao.errors import InvalidInput
from fuyao.fragmentation import ShapeMix
from fuyao.nodescheduler import Binding, LocalScheduler, Unfit
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState
from hub.activetask import member_selector
from hub.fleet import FleetView
from hub.placement import PlacementRequest, Scheduler
from hub.planning.simulate.fleet import SimCluster
from hub.planning.simulate.policies import SimPolicy, registry_for
from hub.planning.simulate.workload import SimTask

WHOLE = 1000
Progress = Callable[[float], None]   # called with the arrived share of the target, 0..1


class Outcome(StrEnum):
    """What became of one arriving task."""

    BOUND = "bound"
    NO_CLUSTER = "no_cluster"          # the hub found no feasible cluster
    RESERVE_FAILED = "reserve_failed"  # the hub's reservation clashed
    MEMBER_UNFIT = "member_unfit"      # the chosen member's scheduler found no node


class Federation:
    """K member schedulers behind the hub's fleet view and cluster scheduler."""

    def __init__(self, clusters: Sequence[SimCluster], policy: SimPolicy, mix: ShapeMix,
                 seed: int = 0) -> None:
        if not clusters:
            raise InvalidInput("the fleet has no clusters")
        self.policy = policy
        self.mix = mix
        self.fleet = FleetView()
        self.members: dict[str, LocalScheduler] = {}
        for c in clusters:
            self.fleet.upsert_cluster(c.name, labels=dict(c.labels), weight=c.weight,
                                      headroom=c.headroom, state=ClusterState.READY)
            member = LocalScheduler(c.nodes, policy.member, mix)
            self.members[c.name] = member
            self.fleet.replace_nodes(c.name, member.nodes())   # the agent's inventory
        self.scheduler = Scheduler(self.fleet, policy.profile, registry=registry_for(seed, mix))
        self.total_gpu_milli = sum(c.gpu_milli for c in clusters)
        # what the nodes already run (a live fleet) counts as allocated from the start
        self.allocated_gpu_milli = sum(WHOLE - d.free_milli for c in clusters for n in c.nodes
                                       for d in n.devices)
        self.placed: dict[str, tuple[str, tuple[Binding, ...]]] = {}
        self.placed_per_cluster: dict[str, int] = dict.fromkeys(self.members, 0)
        self.other_node = 0    # bound tasks the member put on other nodes than the hub's fit
        self.other_model = 0   # GPU tasks the member bound to another model than the hub's fit
        self.other_gpu_node = 0   # GPU tasks the member put on other nodes than the hub's fit

    def submit(self, task: SimTask) -> Outcome:
        """Hub: schedule + reserve; member: bind; agent: delta; hub: release."""
        req = PlacementRequest(task.name, task.name, task.requests, task.selector)
        result = self.scheduler.schedule(req)
        if result.cluster is None:
            return Outcome.NO_CLUSTER
        if not self.scheduler.reserve(req, result).ok:
            return Outcome.RESERVE_FAILED
        member = self.members[result.cluster]
        sent = member_selector(str(task.selector), result.model, task.requests.gpu_milli)
        bound = member.schedule(task.requests, parse_selector(sent))
        if isinstance(bound, Unfit):
            self.scheduler.unreserve(req, result.cluster)
            return Outcome.MEMBER_UNFIT
        changed = [member.node(name) for name in sorted({b.node for b in bound})]
        self.fleet.apply_delta(result.cluster, changed, ())
        self.fleet.release(task.name)
        self.allocated_gpu_milli += sum(m for b in bound for _, m in b.devices)
        self.placed[task.name] = (result.cluster, bound)
        self.placed_per_cluster[result.cluster] += 1
        other = sorted(result.nodes) != sorted(b.node for b in bound)
        self.other_node += other
        if task.requests.gpu_milli:
            self.other_gpu_node += other
            ids = {d for b in bound for d, _ in b.devices}
            models = {d.model for n in changed for d in n.devices if d.id in ids}
            self.other_model += models != {result.model}
        return Outcome.BOUND

    def finish(self, name: str) -> None:
        """A placed task ends: the member releases it and reports the nodes."""
        cluster, bound = self.placed.pop(name)
        member = self.members[cluster]
        member.release(bound)
        changed = [member.node(n) for n in sorted({b.node for b in bound})]
        self.fleet.apply_delta(cluster, changed, ())
        self.allocated_gpu_milli -= sum(m for b in bound for _, m in b.devices)

    def counters(self) -> dict[str, int]:
        """How often the member's binding differed from the nodes / model the hub expected."""
        return {"member_chose_other_node": self.other_node,
                "member_chose_other_gpu_node": self.other_gpu_node,
                "member_chose_other_model": self.other_model}

    def cluster_stats(self) -> dict[str, dict[str, float | int]]:
        """Per cluster: size, GPU and cpu allocation %, and FGD fragmentation % of free GPU."""
        out: dict[str, dict[str, float | int]] = {}
        for name, member in self.members.items():
            nodes = member.nodes()
            gpus = sum(len(n.devices) for n in nodes) * WHOLE
            free = sum(d.free_milli for n in nodes for d in n.devices)
            cpu_total = sum(n.allocatable.cpu_milli for n in nodes)
            cpu_free = sum(n.free.cpu_milli for n in nodes)
            frag = sum(self.mix.fragment(n.free.cpu_milli, n.free.memory_mib,
                                         [d.free_milli for d in n.devices]) for n in nodes)
            out[name] = {
                "nodes": len(nodes), "gpus": gpus // WHOLE,
                "tasks_placed": self.placed_per_cluster[name],
                "gpu_allocation_pct": _pct(gpus - free, gpus),
                "cpu_allocation_pct": _pct(cpu_total - cpu_free, cpu_total),
                "gpu_free": round(free / WHOLE, 3),
                "fragmentation_pct": _pct(frag, free),
                "fragmented_gpus": round(frag / WHOLE, 3),
            }
        return out


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


@dataclass(slots=True)
class Replay:
    """One run: allocation per arrived-workload percent and what became of the tasks."""

    total_gpu_milli: int
    curve: dict[int, float] = field(default_factory=dict)   # arrived % -> allocated %
    outcomes: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    arrived: int = 0
    departed: int = 0
    arrived_pct: float = 0.0
    allocated_pct: float = 0.0
    clock: float = 0.0

    def at(self, percent: int) -> float | None:
        """Allocation % at an arrived-workload percent, or None if the run never got there."""
        return self.curve.get(percent)


def replay(fed: Federation, tasks: Iterable[SimTask], until: float = 100.0, *,
           durations: bool = False, progress: Progress | None = None) -> Replay:
    """Feed tasks in order until arrived GPU demand passes ``until`` % (see the module doc)."""
    total = fed.total_gpu_milli
    if total <= 0:
        raise InvalidInput("the fleet has no GPUs: the allocation ratio is undefined")
    bins: dict[int, list[float]] = defaultdict(list)
    outcomes: dict[str, int] = {o.value: 0 for o in Outcome}
    arrived = count = departed = 0
    stop = (until + 0.5) * total / 100.0
    ends: list[tuple[float, int, str]] = []
    clock = 0.0
    shown = -1
    for task in tasks:
        if arrived >= stop:
            break
        if durations:
            clock = max(clock, task.arrival or 0.0)
            while ends and ends[0][0] <= clock:
                fed.finish(heapq.heappop(ends)[2])
                departed += 1
        arrived += task.gpu_milli
        count += 1
        outcome = fed.submit(task)
        outcomes[outcome.value] += 1
        if durations and outcome is Outcome.BOUND and task.duration is not None:
            heapq.heappush(ends, (clock + task.duration, count, task.name))
        pct = 100.0 * arrived / total
        bins[int(pct + 0.5)].append(100.0 * fed.allocated_gpu_milli / total)
        if progress is not None and int(pct) != shown:
            shown = int(pct)
            progress(min(1.0, arrived / stop))
    return Replay(total, _discrete(bins), outcomes, fed.counters(), count, departed,
                  100.0 * arrived / total, 100.0 * fed.allocated_gpu_milli / total, clock)


def _discrete(bins: Mapping[int, list[float]]) -> dict[int, float]:
    """Mean per whole percent; an empty percent takes its neighbours' (the FGD analysis does)."""
    if not bins:
        return {}
    curve: dict[int, float] = {}
    for pct in range(0, max(bins) + 1):
        values = bins.get(pct) or [*bins.get(pct - 1, []), *bins.get(pct + 1, [])]
        if values:
            curve[pct] = sum(values) / len(values)
    return curve
