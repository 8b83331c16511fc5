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

from collections.abc import Callable
from typing import Any

from fuyao.insight import ClusterScores, DryRunView, ExplainView, NearestFit
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, placement_request
from hub.dag import Dependencies
from hub.explain.whatif import alternatives
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler
from hub.store import TaskRecord
from hub.taskbook import TaskBook

DRY_RUN_ID = "dry-run"
QueueState = Callable[[ActiveTask], dict[str, Any]]


class Explainer:
    """Builds ``DryRunView`` and ``ExplainView`` answers."""

    def __init__(self, scheduler: Scheduler, tasks: TaskBook, deps: Dependencies,
                 queue_state: QueueState | None = None) -> None:
        self.scheduler = scheduler
        self.tasks = tasks
        self.deps = deps
        self.queue_state = queue_state or self._position

    def dry_run(self, spec: TaskSpec) -> DryRunView:
        """Where ``spec`` would go now; stores and reserves nothing."""
        req = placement_request(DRY_RUN_ID, spec, spec.priority)
        result = self.scheduler.schedule(req)
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
            view.alternatives = self._nearest(req)
            view.nearest_fit = view.alternatives[0] if view.alternatives else None
        return view

    async def explain(self, name: str) -> ExplainView:
        """Why task ``name`` waits, or where it went; NotFound if there is no such task."""
        task = self.tasks.by_name(name)
        if task is None:
            rec = await self.tasks.writer.read(self.tasks.writer.store.get_task, name)
            return self._ended(rec)
        view = ExplainView(task=task.name, state=task.state.value, message=task.message,
                           cluster=task.cluster, node=task.node, queue=self.queue_state(task),
                           dependencies=self.deps.states(task, task.spec))
        hold = self.deps.hold(task)
        view.held = hold.reason if hold is not None else None
        if task.state != TaskState.QUEUED:
            return view
        req = task.request()
        result = self.scheduler.schedule(req)
        view.scores = scores_of(result)
        view.reasons = dict(result.reasons)
        if result.error is None:
            view.summary = (f"fits now on {result.cluster}; it goes there on the next "
                            "placement cycle unless held")
            return view
        view.summary = result.error.message
        view.histogram = dict(result.error.histogram)
        view.alternatives = self._nearest(req)
        view.nearest_fit = view.alternatives[0] if view.alternatives else None
        return view

    def _nearest(self, req: Any) -> list[NearestFit]:
        return [NearestFit.model_validate(a.to_json()) for a in alternatives(self.scheduler, req)]

    def _ended(self, rec: TaskRecord) -> ExplainView:
        spec = TaskSpec.model_validate(rec.spec)
        return ExplainView(task=rec.name, state=rec.state, message=rec.message,
                           cluster=rec.cluster, node=rec.node,
                           summary=f"task {rec.state}: {rec.message}" if rec.message else "",
                           queue={"name": rec.queue, "priority": rec.priority},
                           dependencies=self.deps.states(None, spec))

    def _position(self, task: ActiveTask) -> dict[str, Any]:
        """The task's place in its queue's placement order (no quotas known here)."""
        same = [t for t in self.tasks.queued() if t.queue == task.queue]
        position = next((i for i, t in enumerate(same, 1) if t.id == task.id), None)
        return {"name": task.queue, "priority": task.priority, "position": position,
                "queued": len(same), "held_by": None}


def scores_of(result: PlacementResult) -> dict[str, ClusterScores]:
    """Feasible clusters' totals and per-plugin scores, best first."""
    rows = [(v.cluster, v.score, v.plugin_scores) for v in result.verdicts
            if v.status.ok and v.score is not None]
    rows.sort(key=lambda row: -(row[1] or 0.0))
    return {name: ClusterScores(total=round(total or 0.0, 3),
                                plugins={p: round(s, 3) for p, s in parts})
            for name, total, parts in rows}
