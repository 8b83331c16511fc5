"""``Planner``: the hub's capacity-planning service, wired in by ``hub.core.Hub``.

Every answer comes from the hub's own state (fleet view, active tasks, placement profile)
through the real scheduler and fit code on a copy of the fleet view: ``fit``
(``hub.planning.fit``), ``n_minus_one`` (``hub.planning.failover``), ``report``
(fragmentation and grouping, ``hub.planning.fragmentation`` and ``hub.planning.report``).
The REST router ``hub.api.planning`` calls it through ``answer`` / ``fit_async``: the fleet
view and the active tasks are copied on the hub's loop (``frozen_stepwise``: the loop runs
between clusters; the copy shares the live node states, ``hub.planning.snapshot``), the
thinking runs in a worker thread on that one copy (fit and N-1 pack onto it rather than
copy it again), and an answer is reused for two seconds while nothing changed. The cyclic
collector is paused from the copy's start to the answer (its passes over the copy's index
held the loop 0.4-0.45 s each at 300 clusters x 1,000 nodes), and the spent copy is cleared
so that reference counting frees it. Hooks set by the hub: ``quota`` (queue quotas,
``hub.planning.quota``) and ``profiles`` (build a task from its ComputeProfile).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from fuyao.capacity import CapacityReport, FitAnswer, FitRequest, GroupBy, NMinusOne, Shape
from fuyao.errors import NotFound
from fuyao.selector import Selector
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.fleet import NO_MODEL, FleetView, collector_paused
from hub.placement import PlacementRequest, Profile
from hub.planning.failover import Running, n_minus_one
from hub.planning.fit import QuotaProbe, count_fit
from hub.planning.fragmentation import fragmented_devices, resolve, shapes_from_specs
from hub.planning.report import (
    FLEET,
    cluster_rows,
    queue_rows,
    queued_demand,
    regroup,
    site_of,
)
from hub.planning.snapshot import copy_fleet, copy_fleet_stepwise

T = TypeVar("T")
A = TypeVar("A")
CACHE_SECONDS = 2.0
ProfileLookup = Callable[[TaskSpec], TaskSpec]
"""A spec naming a ComputeProfile -> the spec built from it (an error if it is unknown)."""


def no_profiles(spec: TaskSpec) -> TaskSpec:
    """The lookup when the hub has no ComputeProfiles: every name is unknown."""
    raise NotFound(f"compute profile {spec.profile!r} not found (no ComputeProfiles are "
                   f"defined on this hub); give --gpu/--cpu/--memory instead")


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What planning reads of one active task, taken on the hub's loop (``Planner.frozen``)."""

    id: str
    name: str
    spec: TaskSpec
    state: TaskState
    queue: str
    priority: int
    seq: int
    cluster: str | None
    node: str | None
    model: str
    placement: PlacementRequest

    def request(self) -> PlacementRequest:
        """The placement request, as ``ActiveTask.request``."""
        return self.placement


def _released(compute: Callable[[A], T], arg: A, copy: FleetView) -> T:
    """``compute(arg)``, then ``copy`` (a planning copy it spent) cleared (``FleetView.clear``)
    in the same worker thread: freed by reference counting, not by the collector."""
    try:
        return compute(arg)
    finally:
        copy.clear()


class Planner:
    """Capacity answers for one hub: fit, N-1, the capacity report."""

    def __init__(self, fleet: FleetView, profile: Profile,
                 active: Mapping[str, ActiveTask] | Mapping[str, TaskFacts],
                 *, headroom_priority: int = 1000, spend: bool = False) -> None:
        self.fleet = fleet
        self.spend = spend   # the fleet is a copy for one answer: fit and N-1 pack onto it
        self.profile = profile
        self.active = active
        self.headroom_priority = headroom_priority
        self.quota: QuotaProbe | None = None
        self.profiles: ProfileLookup = no_profiles
        self._cache: dict[Hashable, tuple[Hashable, float, object]] = {}

    # -- off the hub's loop (the REST routes) -----------------------------------------------

    def frozen(self) -> Planner:
        """A planner over a copy of the fleet view and of the active tasks as they are now,
        which nothing else touches: it may run on another thread."""
        return self._on(copy_fleet(self.fleet))

    async def frozen_stepwise(self, *, spend: bool = False) -> Planner:
        """``frozen`` with the fleet copied a cluster at a time (``copy_fleet_stepwise``), the
        event loop running between clusters; the active tasks are copied at the end.
        ``spend``: the planner answers one question, on its copy (not copied again)."""
        return self._on(await copy_fleet_stepwise(self.fleet), spend)

    def _on(self, fleet: FleetView, spend: bool = False) -> Planner:
        """A planner over ``fleet`` (a copy) and a copy of the active tasks as they are now."""
        facts = {t.id: TaskFacts(t.id, t.name, t.spec, t.state, t.queue, t.priority, t.seq,
                                 t.cluster, t.node, self._model_of(t), t.request())
                 for t in self.active.values()}
        return Planner(fleet, self.profile, facts, headroom_priority=self.headroom_priority,
                       spend=spend)

    async def answer(self, key: Hashable | None, compute: Callable[[Planner], T]) -> T:
        """``compute`` on a frozen planner in a worker thread, so the hub's loop goes on;
        the answer is reused for ``CACHE_SECONDS`` while nothing changed (``key``: what was
        asked; None: never reused)."""
        stamp = (self.fleet.tick, len(self.active))
        hit = self._cache.get(key) if key is not None else None
        if hit is not None and hit[0] == stamp and time.monotonic() - hit[1] < CACHE_SECONDS:
            return hit[2]  # type: ignore[return-value]
        with collector_paused():
            frozen = await self.frozen_stepwise(spend=True)
            value = await asyncio.to_thread(_released, compute, frozen, frozen.fleet)
        if key is not None:
            self._cache[key] = (stamp, time.monotonic(), value)
        return value

    async def fit_async(self, req: FitRequest) -> FitAnswer:
        """``fit`` with the profile and quota read here and the packing in a worker thread."""
        spec = self._spec(req)
        allowed = self.quota(spec.queue, spec) if self.quota is not None else None
        bound: QuotaProbe | None = None if allowed is None else (lambda _q, _s: allowed)
        with collector_paused():
            copy = await copy_fleet_stepwise(self.fleet)
            return await asyncio.to_thread(_released, lambda fleet: count_fit(
                fleet, self.profile, spec, limit=req.limit,
                headroom_priority=self.headroom_priority, quota=bound, spend=True), copy, copy)

    # -- the answers --------------------------------------------------------------------------

    def fit(self, req: FitRequest) -> FitAnswer:
        """How many more tasks like ``req`` fit now."""
        return count_fit(self.fleet, self.profile, self._spec(req), limit=req.limit,
                         headroom_priority=self.headroom_priority, quota=self.quota,
                         spend=self.spend)

    def _spec(self, req: FitRequest) -> TaskSpec:
        spec = req.task_spec()
        return self.profiles(spec) if spec.profile is not None else spec

    def n_minus_one(self) -> NMinusOne:
        """Could the fleet lose any one cluster now?"""
        running: dict[str, list[Running]] = {}
        for task in self.active.values():
            if task.cluster is not None and task.state != TaskState.QUEUED:
                running.setdefault(task.cluster, []).append(
                    Running(task.request(), self._model_of(task), (-task.priority, task.seq)))
        return n_minus_one(self.fleet, self.profile, running,
                           headroom_priority=self.headroom_priority, spend=self.spend)

    def report(self, by: GroupBy = "cluster", cluster: str | None = None,
               shapes: Sequence[Shape] | None = None) -> CapacityReport:
        """``fuyaoctl capacity``: rows by ``by``, fleet totals per model, fragmentation."""
        if cluster is not None and self.fleet.cluster(cluster) is None:
            raise NotFound(f"cluster {cluster!r} is not in the fleet")
        if shapes:
            weighted, source = resolve(shapes), "file"
        else:
            weighted, source = shapes_from_specs(t.spec for t in self.active.values())
        clusters = self.fleet.clusters()
        fragmented = {c.name: fragmented_devices(c, weighted) for c in clusters}
        per_cluster, per_fleet = queued_demand(clusters, self.queued())
        rows = cluster_rows(self.fleet.capacity(), fragmented, per_cluster)
        fleet = regroup(rows, lambda _: FLEET, distinct_queued=per_fleet)
        verdict = self.n_minus_one()
        if by == "cluster":
            for row in rows:
                loss = verdict.clusters.get(row.group)
                row.n1_safe = None if loss is None else loss.safe
        elif by == "site":
            rows = regroup(rows, site_of({c.name: c for c in clusters}))
        elif by == "model":
            rows = fleet
        else:
            rows = queue_rows(self._by_queue())
        if cluster is not None and by == "cluster":
            rows = [r for r in rows if r.group == cluster]
        return CapacityReport(by=by, rows=rows, fleet=fleet, shapes=[w.shape for w in weighted],
                              shapes_from=source, n1_safe=verdict.safe)

    def queued(self) -> Iterable[tuple[TaskSpec, Selector, str]]:
        """(spec, selector, selector text) of every queued task."""
        for task in self.active.values():
            if task.state == TaskState.QUEUED:
                req = task.request()
                yield task.spec, req.selector, req.selector_key

    def _by_queue(self) -> Iterable[tuple[str, str, str | None, TaskSpec]]:
        for task in self.active.values():
            model = self._model_of(task) if task.cluster is not None else None
            yield task.queue, task.state.value, model, task.spec

    def _model_of(self, task: ActiveTask | TaskFacts) -> str:
        """The device model a placed task holds or runs on (``none``: CPU-only or unknown)."""
        if isinstance(task, TaskFacts):
            return task.model
        held = self.fleet.reservation(task.id)
        if held is not None and held.model:
            return held.model
        cluster = self.fleet.cluster(task.cluster) if task.cluster else None
        node = cluster.node(task.node) if cluster is not None and task.node else None
        if node is not None and node.model_devices:
            return node.primary
        return task.spec.gpu_model or NO_MODEL if task.spec.requests().gpu_milli else NO_MODEL
