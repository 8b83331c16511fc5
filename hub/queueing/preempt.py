"""Preemption planning: the fewest, lowest-ranked victims in ONE cluster that make room.

``Queueing.preempt`` (``hub.queueing.queueing``) calls ``plan`` for a task that fit nowhere,
with the running tasks it may evict (lower rank, or borrowing beyond their queue's quota;
never ``preemptible: false``) grouped by cluster. For each cluster the planner asks the real
placement code: it copies the cluster into a scratch ``FleetView`` with the candidates'
resources given back on their nodes, keeps every other reservation, and runs a scratch
``Scheduler`` with the hub's own profile. It adds candidates lowest rank (then newest)
first until the task fits, then drops every victim it can do without. The cluster with the
fewest victims (then the lowest highest-rank among them) wins. Only the preemption path pays
for this; the placement hot path never does. ``fits_empty`` asks the same of a cluster with
nothing running, so backfill never keeps a cluster for a task that could never fit there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fuyao.errors import FuyaoError
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.spec import TaskRequests
from hub.activetask import ActiveTask
from hub.fleet import WHOLE, ClusterInfo, FleetView
from hub.placement.framework import PlacementRequest
from hub.placement.profile import Profile
from hub.placement.scheduler import Scheduler

MAX_CANDIDATES = 32     # per cluster: the lowest-ranked ones


@dataclass(frozen=True)
class Plan:
    """Evict ``victims`` from ``cluster`` and the task fits there."""

    cluster: str
    victims: tuple[ActiveTask, ...]


class Planner:
    """Finds victims with the hub's own fit code on a scratch copy of one cluster."""

    def __init__(self, fleet: FleetView, profile: Profile, headroom_priority: int,
                 models: Mapping[str, str | None]) -> None:
        self.fleet = fleet
        self.profile = profile
        self.headroom_priority = headroom_priority
        self.models = models

    def plan(self, request: PlacementRequest,
             candidates: Mapping[str, Sequence[ActiveTask]],
             rank: Callable[[ActiveTask], tuple[int, int]],
             keep: Sequence[ActiveTask]) -> Plan | None:
        """The best plan over ``candidates`` (cluster -> evictable tasks), or None.

        ``keep``: tasks placed but not yet bound whose reservations stay held."""
        best: tuple[tuple[int, tuple[int, int], str], Plan] | None = None
        for name in sorted(candidates):
            cluster = self.fleet.cluster(name)
            if cluster is None or not cluster.schedulable or name in request.exclude:
                continue
            order = sorted(candidates[name], key=lambda t: (rank(t), -t.seq))[:MAX_CANDIDATES]
            victims = self._victims(cluster, request, order, rank, keep)
            if victims is None:
                continue
            key = (len(victims), max(rank(v) for v in victims), name)
            if best is None or key < best[0]:
                best = (key, Plan(name, tuple(victims)))
        return None if best is None else best[1]

    def _victims(self, cluster: ClusterInfo, request: PlacementRequest,
                 order: list[ActiveTask], rank: Callable[[ActiveTask], tuple[int, int]],
                 keep: Sequence[ActiveTask]) -> list[ActiveTask] | None:
        if not order or not self.fits(cluster, request, order, keep):
            return None
        chosen: list[ActiveTask] = []
        for task in order:
            chosen.append(task)
            if self.fits(cluster, request, chosen, keep):
                break
        for task in sorted(chosen, key=rank, reverse=True):
            trial = [t for t in chosen if t is not task]
            if trial and self.fits(cluster, request, trial, keep):
                chosen = trial
        return chosen

    def fits_empty(self, cluster: ClusterInfo, request: PlacementRequest) -> bool:
        """Would ``request`` fit ``cluster`` if nothing ran there? (the real fit code, on a
        scratch copy with every node's allocatable free). False: waiting there is futile."""
        scratch = _scratch(cluster)
        scratch.replace_nodes(cluster.name, [_emptied(n.info) for n in cluster.nodes()])
        return self._schedules(scratch, request)

    def _schedules(self, scratch: FleetView, request: PlacementRequest) -> bool:
        scheduler = Scheduler(scratch, self.profile, headroom_priority=self.headroom_priority,
                              cache=False)
        return scheduler.schedule(replace(request, exclude=frozenset())).cluster is not None

    def fits(self, cluster: ClusterInfo, request: PlacementRequest,
             victims: Sequence[ActiveTask], keep: Sequence[ActiveTask]) -> bool:
        """Would ``request`` fit ``cluster`` with ``victims`` gone? (the real fit code)"""
        scratch = _scratch(cluster)
        freed: dict[str, list[tuple[TaskRequests, str | None]]] = {}
        gone = {v.id for v in victims}
        for victim in victims:
            if not victim.node or self.fleet.reservation(victim.id) is not None:
                continue   # not bound: its reservation is simply not copied
            nodes = victim.node.split(",")
            req = victim.spec.requests()
            for i in range(req.replicas):
                freed.setdefault(nodes[i % len(nodes)], []).append(
                    (req, self.models.get(victim.id)))
        scratch.replace_nodes(cluster.name, [
            _given_back(n.info, freed.get(n.name, ())) for n in cluster.nodes()])
        for task in keep:
            held = self.fleet.reservation(task.id)
            if held is None or held.cluster != cluster.name or task.id in gone:
                continue
            try:
                scratch.reserve(cluster.name, task.id, held.requests, held.nodes,
                                model=held.model)
            except FuyaoError:
                continue
        return self._schedules(scratch, request)


def _scratch(cluster: ClusterInfo) -> FleetView:
    """A fleet view holding only ``cluster``'s settings, its taints too (its nodes are added
    by the caller)."""
    scratch = FleetView()
    scratch.upsert_cluster(cluster.name, labels=cluster.labels, weight=cluster.weight,
                           headroom=cluster.headroom, state=cluster.state,
                           cordoned=cluster.cordoned, taints=cluster.taints)
    return scratch


def _emptied(info: NodeInfo) -> NodeInfo:
    """``info`` with nothing running: all of its allocatable free, every device whole."""
    devices = tuple(replace(d, free_milli=WHOLE, free_memory_mib=d.memory_mib)
                    for d in info.devices)
    return replace(info, free=info.allocatable, devices=devices)


def _given_back(info: NodeInfo, freed: Sequence[tuple[TaskRequests, str | None]]) -> NodeInfo:
    """``info`` with each (replica requests, model) of ``freed`` returned to its free room."""
    if not freed:
        return info
    cpu, mem, pods = info.free.cpu_milli, info.free.memory_mib, info.free.pods
    devices = list(info.devices)
    for req, model in freed:
        cpu = min(info.allocatable.cpu_milli, cpu + req.cpu_milli)
        mem = min(info.allocatable.memory_mib, mem + req.memory_mib)
        pods = min(info.allocatable.pods, pods + 1)
        if req.gpu_milli:
            _return_devices(devices, req, model)
    return replace(info, free=ResourceAmounts(cpu, mem, pods), devices=tuple(devices))


def _return_devices(devices: list[DeviceInfo], req: TaskRequests, model: str | None) -> None:
    fits_model = [i for i, d in enumerate(devices) if model is None or d.model == model]
    if req.gpu_milli >= WHOLE:
        need = req.gpu_devices
        for i in fits_model:
            if need and devices[i].free_milli == 0:
                devices[i] = replace(devices[i], free_milli=WHOLE,
                                     free_memory_mib=devices[i].memory_mib)
                need -= 1
        return
    shared = [i for i in fits_model if devices[i].free_milli + req.gpu_milli <= WHOLE]
    if shared:
        i = min(shared, key=lambda j: devices[j].free_milli)
        d = devices[i]
        devices[i] = replace(d, free_milli=d.free_milli + req.gpu_milli,
                             free_memory_mib=min(d.memory_mib,
                                                 d.free_memory_mib + req.gpu_memory_mib))
