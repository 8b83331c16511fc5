"""``Planner``: the hub's capacity-planning service, wired in by ``hub.core.Hub``.

The REST router ``hub.api.planning`` calls it. Every answer comes from the hub's own state
(fleet view, active tasks, placement profile) through the real scheduler and fit code on a
copy of the fleet view: ``fit`` (``hub.planning.fit``), ``n_minus_one``
(``hub.planning.failover``), ``report`` (fragmentation and grouping,
``hub.planning.fragmentation`` and ``hub.planning.report``). Hooks for rooms that land
later: ``quota`` (queue quotas; ``hub.planning.fit.QuotaProbe``) and ``profiles`` (turn a
ComputeProfile name into a task spec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from fuyao.capacity import CapacityReport, FitAnswer, FitRequest, GroupBy, NMinusOne, Shape
from fuyao.errors import NotFound
from fuyao.selector import Selector
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.fleet import NO_MODEL, FleetView
from hub.placement import Profile
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

ProfileLookup = Callable[[TaskSpec], TaskSpec]
"""A spec naming a ComputeProfile -> the spec built from it (an error if it is unknown)."""


def no_profiles(spec: TaskSpec) -> TaskSpec:
    """The lookup when the hub has no ComputeProfiles: every name is unknown."""
    raise NotFound(f"compute profile {spec.profile!r} not found (no ComputeProfiles are "
                   f"defined on this hub); give --gpu/--cpu/--memory instead")


class Planner:
    """Capacity answers for one hub: fit, N-1, the capacity report."""

    def __init__(self, fleet: FleetView, profile: Profile, active: Mapping[str, ActiveTask],
                 *, headroom_priority: int = 1000) -> None:
        self.fleet = fleet
        self.profile = profile
        self.active = active
        self.headroom_priority = headroom_priority
        self.quota: QuotaProbe | None = None
        self.profiles: ProfileLookup = no_profiles

    def fit(self, req: FitRequest) -> FitAnswer:
        """How many more tasks like ``req`` fit now."""
        spec = req.task_spec()
        if spec.profile is not None:
            spec = self.profiles(spec)
        return count_fit(self.fleet, self.profile, spec, limit=req.limit,
                         headroom_priority=self.headroom_priority, quota=self.quota)

    def n_minus_one(self) -> NMinusOne:
        """Could the fleet lose any one cluster now?"""
        running: dict[str, list[Running]] = {}
        for task in self.active.values():
            if task.cluster is not None and task.state != TaskState.QUEUED:
                running.setdefault(task.cluster, []).append(
                    Running(task.request(), self._model_of(task), (-task.priority, task.seq)))
        return n_minus_one(self.fleet, self.profile, running,
                           headroom_priority=self.headroom_priority)

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

    def _model_of(self, task: ActiveTask) -> str:
        """The device model a placed task holds or runs on (``none``: CPU-only or unknown)."""
        held = self.fleet.reservation(task.id)
        if held is not None and held.model:
            return held.model
        cluster = self.fleet.cluster(task.cluster) if task.cluster else None
        node = cluster.node(task.node) if cluster is not None and task.node else None
        if node is not None and node.model_devices:
            return node.primary
        return task.spec.gpu_model or NO_MODEL if task.spec.requests().gpu_milli else NO_MODEL
