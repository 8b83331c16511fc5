"""The explain and dry-run views, built from the live scheduler (reads only, no store write).

``Hub`` builds one ``Explainer``; the REST routes in ``hub.api.explain`` call ``dry_run``
(``POST /api/v1/tasks:dry-run``) and ``explain`` (``GET /api/v1/tasks/{name}/explain``).
A queued task is judged afresh against the fleet as it is now - the same
``Scheduler.schedule`` the placement loop runs - so the histogram, the scores and the
nearest fit agree with what the next cycle would do. ``queue_state`` is where the queueing
layer plugs in its "which quota holds it" answer; without one, the queue part says the
task's position in the placement order.
"""

from __future__ import annotations

from typing import Any

from fuyao.insight import ClusterScores, DryRunView, ExplainView, NearestFit
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, placement_request
from hub.dag import Dependencies
from hub.explain.whatif import alternatives
from hub.placement import memshare
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler
from hub.placement.variants import Schedulers
from hub.queueing import Queueing
from hub.queueing.quota import demand, quota_hold
from hub.store import TaskRecord
from hub.taskbook import TaskBook

DRY_RUN_ID = "dry-run"
QUEUE_COST = 0.25
"""What moving to another queue counts as in the nearest-fit ranking (nothing given up)."""


class Explainer:
    """Builds ``DryRunView`` and ``ExplainView`` answers."""

    def __init__(self, schedulers: Schedulers, tasks: TaskBook, deps: Dependencies,
                 queueing: Queueing | None = None) -> None:
        self.schedulers = schedulers
        self.tasks = tasks
        self.deps = deps
        self.queueing = queueing

    def dry_run(self, spec: TaskSpec) -> DryRunView:
        """Where ``spec`` would go now; stores and reserves nothing."""
        req = placement_request(DRY_RUN_ID, spec, spec.priority)
        scheduler = self.schedulers.for_weights(spec.score_weights)
        req, result = memshare.schedule(scheduler, req)
        view = DryRunView(name=spec.name, cluster=result.cluster, nodes=list(result.nodes),
                          model=result.model, scores=scores_of(result),
                          reasons=dict(result.reasons))
        missing = [n for n in spec.after if self.tasks.by_name(n) is None]
        if spec.after:
            view.held = (f"waits for {', '.join(spec.after)} to succeed"
                         + (f" ({', '.join(missing)} not active)" if missing else ""))
        if result.error is not None:
            view.error = result.error.message
            view.histogram = dict(result.error.histogram)
            view.alternatives = _nearest(scheduler, req)
            view.nearest_fit = view.alternatives[0] if view.alternatives else None
        return view

    async def explain(self, name: str) -> ExplainView:
        """Why task ``name`` waits, or where it went; NotFound if there is no such task."""
        task = self.tasks.by_name(name)
        if task is None:
            rec = await self.tasks.writer.read(self.tasks.writer.store.get_task, name)
            return self._ended(rec)
        view = ExplainView(task=task.name, state=task.state.value, message=task.message,
                           cluster=task.cluster, node=task.node, queue=self._queue(task),
                           dependencies=self.deps.states(task, task.spec))
        hold = self.deps.hold(task)
        view.held = hold.reason if hold is not None else None
        if task.state != TaskState.QUEUED:
            return view
        req = task.request()
        scheduler = self.schedulers.for_weights(task.spec.score_weights)
        req, result = memshare.schedule(scheduler, req)
        view.scores = scores_of(result)
        view.reasons = dict(result.reasons)
        if result.error is None:
            held = view.queue.get("held_by")
            view.summary = (f"the fleet has room on {result.cluster}, but {held}" if held else
                            f"fits now on {result.cluster}; it goes there on the next "
                            "placement cycle unless held")
            if held:
                view.alternatives = self._within_quota(task, scheduler, req)
                view.nearest_fit = view.alternatives[0] if view.alternatives else None
            return view
        view.summary = result.error.message
        view.histogram = dict(result.error.histogram)
        view.alternatives = _nearest(scheduler, req)
        view.nearest_fit = view.alternatives[0] if view.alternatives else None
        return view

    def _queue(self, task: ActiveTask) -> dict[str, Any]:
        """The queueing layer's state holding the task, or its place in the plain order."""
        held = self.queueing.hold_for(task) if self.queueing is not None else None
        return held if held is not None else self._position(task)

    def _within_quota(self, task: ActiveTask, scheduler: Scheduler,
                      req: PlacementRequest) -> list[NearestFit]:
        """A task its queue's quota holds: another queue whose quota has room, and the
        smaller requests its own queue's quota admits now, cheapest first."""
        assert self.queueing is not None
        states = list(self.queueing.states())
        own = next((q for q in states if q.name == task.queue), None)
        usage = self.queueing.usage
        found = [a for a in [self._another_queue(task, scheduler, req)] if a is not None]
        if own is not None:
            found += [NearestFit.model_validate(a.to_json()) for a in alternatives(
                scheduler, req, lambda r, model: quota_hold(
                    own, states, usage, demand(r, model)) is None)]
        return sorted(found, key=lambda a: a.cost)

    def _another_queue(self, task: ActiveTask, scheduler: Scheduler,
                       req: PlacementRequest) -> NearestFit | None:
        """When a quota holds the task: the first other queue whose quota admits it now and
        where the fleet has room (the queueing layer's own quota rule)."""
        if self.queueing is None or not (self.queueing.hold_for(task) or {}).get("held_by"):
            return None
        states = list(self.queueing.states())
        need = demand(task.spec.requests())
        for state in sorted(states, key=lambda q: q.name):
            if state.name == task.queue or quota_hold(state, states, self.queueing.usage,
                                                      need) is not None:
                continue
            result = scheduler.schedule(req)
            if result.cluster is None:
                return None
            return NearestFit(change={"queue": state.name},
                              description=f"in queue {state.name} instead of {task.queue} "
                                          "(its quota has room)",
                              cluster=result.cluster, nodes=list(result.nodes), cost=QUEUE_COST)
        return None

    def _ended(self, rec: TaskRecord) -> ExplainView:
        spec = TaskSpec.model_validate(rec.spec)
        return ExplainView(task=rec.name, state=rec.state, message=rec.message,
                           cluster=rec.cluster, node=rec.node,
                           summary=f"task {rec.state}: {rec.message}" if rec.message else "",
                           queue={"queue": rec.queue, "priority": rec.priority},
                           dependencies=self.deps.states(None, spec))

    def _position(self, task: ActiveTask) -> dict[str, Any]:
        """The task's place in its queue's placement order (no quotas known here)."""
        same = [t for t in self.tasks.queued() if t.queue == task.queue]
        position = next((i for i, t in enumerate(same, 1) if t.id == task.id), None)
        return {"queue": task.queue, "priority": task.priority, "position": position,
                "queued": len(same), "held_by": None}


def _nearest(scheduler: Scheduler, req: PlacementRequest) -> list[NearestFit]:
    return [NearestFit.model_validate(a.to_json()) for a in alternatives(scheduler, req)]


def scores_of(result: PlacementResult) -> dict[str, ClusterScores]:
    """Feasible clusters' totals and per-plugin scores, best first."""
    rows = [(v.cluster, v.score, v.plugin_scores) for v in result.verdicts
            if v.status.ok and v.score is not None]
    rows.sort(key=lambda row: -(row[1] or 0.0))
    return {name: ClusterScores(total=round(total or 0.0, 3),
                                plugins={p: round(s, 3) for p, s in parts})
            for name, total, parts in rows}
