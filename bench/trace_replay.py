"""In-process replay of a GPU trace through the real hub and member schedulers.

Used by ``bench/trace_quality.py`` (and its tests): the FGD paper's experiment - tasks of
the Alibaba "openb" trace arrive one by one, none leave - but over a federation. The trace's
nodes are split into K member clusters; for every task the hub (``hub.fleet.FleetView`` +
``hub.placement.Scheduler``) chooses a cluster and reserves, the member's own scheduler
(``fuyao.nodescheduler.LocalScheduler``, best-fit) binds it to a node, the
member's changed nodes go back to the hub as a delta and the hub releases its reservation,
as the agent channel and the placement loop do. No processes, no network.

- Nodes come from the sim fleet loader and ``build_node`` (the labels every member reports).
- Tasks become ``TaskSpec``s: ``gpu_milli`` < 1000 with one GPU is a share of one card,
  ``num_gpu`` > 1 whole cards; ``gpu_spec`` (``V100M16|V100M32``) becomes ``gpu_model`` plus,
  when every alternative names its memory, a ``fuyao.io/gpu-memory`` selector.
- Arrival order follows the FGD simulator: sort by name, shuffle with the seed, then add
  random clones of trace pods until the GPU demand reaches ``tune`` x capacity (1.3 in the
  paper). Python's RNG, not Go's: the same procedure, not the same permutations.
- The metric is the FGD analysis': GPU milli allocated / total GPU milli, sampled after each
  arrival and averaged over the arrivals whose arrived demand rounds to each whole percent.
"""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import ClassVar, Protocol

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.errors import InvalidInput
from fuyao.fleetfile import load_fleet
from fuyao.inventory import NodeInfo
from fuyao.nodebuild import build_node
from fuyao.nodescheduler import LocalScheduler, Policy, Unfit
from fuyao.selector import Selector, parse_selector
from fuyao.spec import ClusterState, TaskRequests, TaskSpec
from hub.activetask import member_selector
from hub.fleet import ClusterInfo, FleetView
from hub.placement import (
    DEFAULT_PROFILE,
    CycleState,
    Handle,
    PlacementRequest,
    Profile,
    Scheduler,
    ScoreEntry,
    with_plugins,
)

WHOLE = 1000
FGD_TUNE = 1.3
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class Split(StrEnum):
    """How the node list is divided among member clusters."""

    ROUND_ROBIN = "round-robin"   # node i -> cluster i mod K: every cluster gets the same mix
    CONTIGUOUS = "contiguous"     # K consecutive runs of the list: clusters differ in hardware


class ClusterChoice(StrEnum):
    """How the hub picks among the clusters that pass its filters."""

    DEFAULT = "default"   # the hub's DEFAULT_PROFILE
    RANDOM = "random"     # same filters, a uniformly random feasible cluster


class Outcome(StrEnum):
    """What became of one arriving task."""

    BOUND = "bound"
    NO_CLUSTER = "no_cluster"          # the hub found no feasible cluster
    RESERVE_FAILED = "reserve_failed"  # the hub's reservation clashed (should not happen here)
    MEMBER_UNFIT = "member_unfit"      # the chosen member's scheduler found no node


# -- nodes ----------------------------------------------------------------------------------


def load_nodes(spec: str) -> list[NodeInfo]:
    """Nodes of ``FILE.csv[:START[:COUNT]]`` (or a YAML fleet), normalized as a member would."""
    fleet = load_fleet(spec)
    return [build_node(n.name, n.labels, n.allocatable, unschedulable=n.unschedulable)
            for n in fleet.nodes]


def split_nodes(nodes: Sequence[NodeInfo], clusters: int, how: Split) -> list[list[NodeInfo]]:
    """The node list divided into ``clusters`` non-empty members, in list order."""
    if not 1 <= clusters <= len(nodes):
        raise InvalidInput(f"clusters: {clusters} must be between 1 and {len(nodes)} (nodes)")
    if how is Split.ROUND_ROBIN:
        return [list(nodes[i::clusters]) for i in range(clusters)]
    size, extra = divmod(len(nodes), clusters)
    out: list[list[NodeInfo]] = []
    start = 0
    for i in range(clusters):
        end = start + size + (1 if i < extra else 0)
        out.append(list(nodes[start:end]))
        start = end
    return out


def gpu_milli_of(nodes: Iterable[NodeInfo]) -> int:
    """Total GPU capacity of the nodes in milli-devices."""
    return sum(len(n.devices) for n in nodes) * WHOLE


# -- tasks ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceTask:
    """One trace pod as the hub and the member see it."""

    name: str
    requests: TaskRequests
    selector: Selector
    gpu_spec: str = ""

    @property
    def gpu_milli(self) -> int:
        """GPU demand in milli-devices (what 'arrived workload' counts)."""
        return self.requests.gpu_milli * self.requests.replicas


def gpu_constraint(gpu_spec: str) -> tuple[str | None, str | None]:
    """``gpu_spec`` -> (``TaskSpec.gpu_model``, extra selector) in canonical model names.

    ``V100M16|V100M32`` -> ``("V100", "fuyao.io/gpu-memory in (16Gi, 32Gi)")``; a model given
    without memory (``P100|V100M16``) leaves memory free, which may admit more cards than the
    spec (``check_constraints`` counts those).
    """
    parts = [p.strip() for p in gpu_spec.split("|") if p.strip()]
    if not parts:
        return None, None
    models: list[str] = []
    memories: list[int | None] = []
    for part in parts:
        model, memory = DEFAULT_CATALOG.canonical(part)
        if model not in models:
            models.append(model)
        memories.append(memory)
    selector = None
    if all(m is not None for m in memories):
        gib = sorted({m // 1024 for m in memories if m is not None})
        selector = f"fuyao.io/gpu-memory in ({', '.join(f'{g}Gi' for g in gib)})"
    return "|".join(models), selector


def task_from_row(row: Mapping[str, str | None], where: str) -> TraceTask:
    """One pod-list row as a validated ``TaskSpec``'s requests and selector."""
    try:
        values = {c: int((row.get(c) or "0").strip() or "0") for c in POD_COLUMNS[1:]}
    except ValueError as exc:
        raise InvalidInput(f"{where}: not a whole number: {exc}") from exc
    num_gpu, gpu_milli = values["num_gpu"], values["gpu_milli"]
    if num_gpu > 1 and gpu_milli != WHOLE:
        raise InvalidInput(f"{where}: {num_gpu} GPUs of {gpu_milli}m: only one GPU can be shared")
    gpu = 0 if num_gpu == 0 else (f"{gpu_milli}m" if num_gpu == 1 else str(num_gpu))
    spec_text = (row.get("gpu_spec") or "").strip()
    model, selector = gpu_constraint(spec_text)
    try:
        spec = TaskSpec(name=(row.get("name") or "").strip(), cpu=f"{values['cpu_milli']}m",
                        memory=f"{values['memory_mib']}Mi", gpu=gpu, gpu_model=model,
                        selector=selector)
    except ValueError as exc:   # pydantic's ValidationError
        raise InvalidInput(f"{where}: {exc}") from exc
    return TraceTask(spec.name, spec.requests(), parse_selector(spec.effective_selector()),
                     spec_text)


def load_tasks(path: Path) -> list[TraceTask]:
    """Every pod of a pod list (``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read pod list: {exc.strerror or exc}") from exc
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in POD_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InvalidInput(f"{path}: header: missing column(s) {', '.join(missing)}")
    return [task_from_row(row, f"{path}: row {i} (line {i + 2})") for i, row in enumerate(reader)]


def arrival_order(tasks: Sequence[TraceTask], seed: int, capacity_milli: int,
                  tune: float = FGD_TUNE) -> list[TraceTask]:
    """The FGD simulator's order: by name, shuffled, then tuned to ``tune`` x capacity.

    Tuning up appends clones (``<name>-tuned-<i>``) drawn uniformly from the trace until the
    next one would pass the target; tuning down drops random tasks until it is met.
    """
    rng = random.Random(seed)
    ordered = sorted(tasks, key=lambda t: t.name)
    out = list(ordered)
    rng.shuffle(out)
    target = tune * capacity_milli
    demand = sum(t.gpu_milli for t in out)
    while demand > target and out:
        demand -= out.pop(rng.randrange(len(out))).gpu_milli
    clone = 0
    while demand < target and ordered:
        pick = ordered[rng.randrange(len(ordered))]
        if demand + pick.gpu_milli > target:
            break
        out.append(TraceTask(f"{pick.name}-tuned-{clone}", pick.requests, pick.selector,
                             pick.gpu_spec))
        demand += pick.gpu_milli
        clone += 1
    return out


def check_constraints(tasks: Iterable[TraceTask], nodes: Sequence[NodeInfo],
                      raw_models: Mapping[str, str]) -> int:
    """Tasks whose selector admits a different node set than their ``gpu_spec`` means.

    FGD matches a spec against each node's raw model (``V100M32``); ``raw_models`` maps node
    name -> that string (from the node list).
    """
    memo: dict[str, bool] = {}
    wrong = 0
    for task in tasks:
        if not task.gpu_spec:
            continue
        if task.gpu_spec not in memo:
            wanted = set(task.gpu_spec.split("|"))
            memo[task.gpu_spec] = any(
                (raw_models.get(n.name, "") in wanted) != task.selector.matches(n.labels)
                for n in nodes if n.devices)
        wrong += memo[task.gpu_spec]
    return wrong


# -- the hub's cluster choice -----------------------------------------------------------------


class _RandomCluster:
    """Bench-only score plugin: a uniformly random feasible cluster (seeded)."""

    name: ClassVar[str] = "RandomCluster"

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Raw score 0: cacheable; ``normalize`` draws the real one per decision."""
        return 0.0

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        """A fresh random 0..100 per feasible cluster."""
        scores[:] = [self._rng.uniform(0.0, 100.0) for _ in clusters]


def scheduler_for(fleet: FleetView, choice: ClusterChoice, seed: int) -> Scheduler:
    """The hub's scheduler with the default profile, or the random-choice baseline."""
    if choice is ClusterChoice.DEFAULT:
        return Scheduler(fleet, DEFAULT_PROFILE)
    rng = random.Random(seed)

    def factory(handle: Handle) -> _RandomCluster:
        del handle
        return _RandomCluster(rng)

    registry = with_plugins({_RandomCluster.name: factory})
    profile = Profile(DEFAULT_PROFILE.filters, (ScoreEntry(_RandomCluster.name),),
                      DEFAULT_PROFILE.reserves)
    return Scheduler(fleet, profile, registry=registry)


# -- targets: a federation, or one bare member scheduler ---------------------------------------


class Target(Protocol):
    """Something tasks arrive at."""

    total_gpu_milli: int
    allocated_gpu_milli: int

    def submit(self, task: TraceTask) -> Outcome:
        """Place and bind one task, or say why not."""
        ...

    def counters(self) -> dict[str, int]:
        """Extra counts the target keeps (name -> count)."""
        ...


class SinglePool:
    """All nodes in one member scheduler, no hub: the single-pool reference."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.member = LocalScheduler(nodes, Policy.BEST_FIT)
        self.total_gpu_milli = gpu_milli_of(nodes)
        self.allocated_gpu_milli = 0

    def submit(self, task: TraceTask) -> Outcome:
        """Bind with the member scheduler alone."""
        bound = self.member.schedule(task.requests, task.selector)
        if isinstance(bound, Unfit):
            return Outcome.MEMBER_UNFIT
        self.allocated_gpu_milli += sum(m for b in bound for _, m in b.devices)
        return Outcome.BOUND

    def counters(self) -> dict[str, int]:
        """None: a bare member has no hub to disagree with."""
        return {}


class Federation:
    """K member schedulers behind the hub's fleet view and cluster scheduler."""

    def __init__(self, members: Sequence[Sequence[NodeInfo]], *, choice: ClusterChoice,
                 headroom: float, seed: int = 0) -> None:
        self.fleet = FleetView()
        self.members: dict[str, LocalScheduler] = {}
        width = len(str(len(members) - 1))
        for i, nodes in enumerate(members):
            name = f"member-{i:0{width}d}"
            self.fleet.upsert_cluster(name, labels={}, weight=1, headroom=headroom,
                                      state=ClusterState.READY)
            member = LocalScheduler(nodes, Policy.BEST_FIT)
            self.members[name] = member
            self.fleet.replace_nodes(name, member.nodes())    # the agent's inventory on connect
        self.scheduler = scheduler_for(self.fleet, choice, seed)
        self.total_gpu_milli = sum(gpu_milli_of(m) for m in members)
        self.allocated_gpu_milli = 0
        self.other_node = 0    # bound tasks the member put on other nodes than the hub's fit
        self.other_model = 0   # GPU tasks the member put on another model than the hub's fit

    def submit(self, task: TraceTask) -> Outcome:
        """Hub: schedule + reserve; member: bind; agent: delta; hub: release."""
        req = PlacementRequest(task.name, task.name, task.requests, task.selector)
        result = self.scheduler.schedule(req)
        if result.cluster is None:
            return Outcome.NO_CLUSTER
        if not self.scheduler.reserve(req, result).ok:
            return Outcome.RESERVE_FAILED
        member = self.members[result.cluster]
        # The member binds with the selector the hub sends it (the fit's model pinned).
        sent = member_selector(str(task.selector), result.model, task.requests.gpu_milli)
        bound = member.schedule(task.requests, parse_selector(sent))
        if isinstance(bound, Unfit):
            self.scheduler.unreserve(req, result.cluster)
            return Outcome.MEMBER_UNFIT
        changed = {name: member.node(name) for name in sorted({b.node for b in bound})}
        self.fleet.apply_delta(result.cluster, changed.values(), ())
        self.fleet.release(task.name)
        self.allocated_gpu_milli += sum(m for b in bound for _, m in b.devices)
        self.other_node += sorted(result.nodes) != sorted(b.node for b in bound)
        if task.requests.gpu_milli:
            ids = {d for b in bound for d, _ in b.devices}
            models = {d.model for n in changed.values() for d in n.devices if d.id in ids}
            self.other_model += models != {result.model}
        return Outcome.BOUND

    def counters(self) -> dict[str, int]:
        """How often the member's binding differed from the nodes / model the hub expected."""
        return {"member_chose_other_node": self.other_node,
                "member_chose_other_model": self.other_model}

    def hub_allocated_gpu_milli(self) -> int:
        """GPU milli in use as the hub's fleet view sees it (member use + reservations)."""
        return sum(t.used_milli for c in self.fleet.clusters() for t in c.totals().values())


# -- the replay -----------------------------------------------------------------------------


@dataclass(slots=True)
class Replay:
    """One run: allocation per arrived-workload percent and what became of the tasks."""

    total_gpu_milli: int
    curve: dict[int, float] = field(default_factory=dict)   # arrived % -> allocated %
    outcomes: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    arrived_pct: float = 0.0
    allocated_pct: float = 0.0

    def at(self, percent: int) -> float | None:
        """Allocation % at an arrived-workload percent, or None if the run never got there."""
        return self.curve.get(percent)


def replay(target: Target, tasks: Iterable[TraceTask], until: float = 100.0) -> Replay:
    """Feed tasks in order until arrived GPU demand passes ``until`` % (+0.5: that bin is whole)."""
    total = target.total_gpu_milli
    if total <= 0:
        raise InvalidInput("the nodes have no GPUs: allocation ratio is undefined")
    bins: dict[int, list[float]] = defaultdict(list)
    outcomes: dict[str, int] = {o.value: 0 for o in Outcome}
    arrived = 0
    stop = (until + 0.5) * total / 100.0
    for task in tasks:
        if arrived >= stop:
            break
        arrived += task.gpu_milli
        outcomes[target.submit(task).value] += 1
        pct = 100.0 * arrived / total
        bins[int(pct + 0.5)].append(100.0 * target.allocated_gpu_milli / total)
    curve = _discrete(bins)
    return Replay(total, curve, outcomes, target.counters(), 100.0 * arrived / total,
                  100.0 * target.allocated_gpu_milli / total)


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
