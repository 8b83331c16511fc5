"""Placing a task's replicas as parts across clusters, with the real fit code.

Called by ``hub.division.book.Division`` during a placement cycle (no I/O here): ``plan``
measures, for each cluster the task is feasible on, the most replicas it can take now (a
bisection over the scheduler's own decision with every other cluster excluded), divides
the replicas by the task's ``spread`` and reserves one part per cluster in the fleet view.
It answers the new parts (task and decision), or a ``DivisionError`` saying why not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fuyao.spec import TaskState
from fuyao.spread import AGGREGATED
from hub.activetask import ActiveTask
from hub.clusters import utcnow
from hub.placement.division import describe, divide
from hub.placement.framework import PlacementRequest
from hub.placement.result import FitError, PlacementResult
from hub.placement.scheduler import Scheduler
from hub.taskids import new_id

Decide = Callable[[PlacementRequest], tuple[PlacementRequest, PlacementResult]]
NewPart = tuple[ActiveTask, PlacementResult]


@dataclass(frozen=True, slots=True)
class DivisionError(FitError):
    """Not enough replicas fit across the fleet: the summary says how many, and where."""

    summary: str = ""

    @property
    def message(self) -> str:
        return self.summary


def capacity(decide: Decide, base: PlacementRequest, cluster: str, clusters: Sequence[str],
             most: int) -> int:
    """The most replicas (up to ``most``) of ``base`` that ``cluster`` takes now."""
    others = base.exclude | frozenset(c for c in clusters if c != cluster)

    def fits(k: int) -> bool:
        asked = replace(base, requests=replace(base.requests, replicas=k), exclude=others)
        return decide(asked)[1].cluster == cluster

    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def plan(task: ActiveTask, base: PlacementRequest, decide: Decide, scheduler: Scheduler,
         clusters: Sequence[str], *, most: int, minimum: int, first_index: int,
         ) -> list[NewPart] | PlacementResult:
    """Reserve parts for ``most`` replicas of ``task`` (at least ``minimum``), or a result
    whose error says why not. Part names go on from ``first_index``."""
    _, probe = decide(replace(base, requests=replace(base.requests, replicas=1)))
    feasible = sorted((v for v in probe.verdicts if v.status.ok),
                      key=lambda v: -(v.score or 0.0))
    room = {v.cluster: capacity(decide, base, v.cluster, clusters, most) for v in feasible}
    spec = task.spec
    parts = divide(most, room, spread=spec.spread, weights=spec.spread_weights,
                   dynamic=spec.spread_dynamic)
    placed = sum(parts.values())
    if placed < minimum:
        return _miss(probe, len(clusters), spec.replicas, most, minimum, room)
    out: list[NewPart] = []
    for index, (cluster, k) in enumerate(parts.items(), start=first_index):
        child = new_part(task, index, k)
        others = base.exclude | frozenset(c for c in clusters if c != cluster)
        asked = replace(base, task_id=child.id, name=child.name, exclude=others,
                        requests=replace(base.requests, replicas=k))
        variant, result = decide(asked)
        if result.cluster == cluster and scheduler.reserve(variant, result).ok:
            out.append((child, result))
    if sum(c.spec.replicas for c, _ in out) < minimum:
        for child, _ in out:
            scheduler.fleet.release(child.id)
        return _miss(probe, len(clusters), spec.replicas, most, minimum, room)
    return out


def new_part(task: ActiveTask, index: int, replicas: int) -> ActiveTask:
    """The part ``<task>.<index>``: the task's spec for ``replicas`` replicas, whole in one
    cluster (a gang), in the task's queue at its priority."""
    spec = task.spec.model_copy(update={
        "replicas": replicas, "gang": True, "min_replicas": None, "spread": AGGREGATED,
        "spread_weights": {}, "spread_dynamic": False})
    now = utcnow()
    return ActiveTask(id=new_id(), name=f"{task.name}.{index}", spec=spec,
                      state=TaskState.QUEUED, queue=task.queue, priority=task.priority, seq=0,
                      created_at=now, updated_at=now, owner=task.owner, parent=task.id,
                      failover=task.failover)


def _miss(probe: PlacementResult, total: int, replicas: int, most: int, minimum: int,
          room: dict[str, int]) -> PlacementResult:
    fits = {c: n for c, n in room.items() if n}
    whole = "" if most == replicas else f" more (of {replicas})"
    need = (f"all {most}" if minimum == most else f"at least {minimum} (min_replicas)")
    summary = (f"divided across clusters, {sum(fits.values())} of {most} replicas{whole} "
               f"fit now ({describe(fits)}); needs {need}")
    base = probe.error or FitError(total, ())
    error = DivisionError(base.total, base.histogram, base.nearest_fit, summary)
    return PlacementResult(None, (), error, None, probe.statuses, probe.table)
