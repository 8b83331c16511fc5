"""The REST routes think on a frozen copy in a worker thread: it must answer as the live
view does, and leave the live view alone."""

from __future__ import annotations

from datetime import UTC, datetime

from fuyao.capacity import FitRequest
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.placement import DEFAULT_PROFILE, Scheduler
from hub.planning.planner import Planner
from tests.placement.builders import fleet_of, node

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def planner() -> Planner:
    """x: 8 H100 + 4 T4 nodes, y: 8 H100 (one node); three tasks placed (reserved, not bound),
    one queued."""
    fleet = fleet_of({"x": [node("x1", "H100", 8), node("x2", "T4", 4)],
                      "y": [node("y1", "H100", 8, free_milli=[1000] * 4 + [0] * 4)]},
                     headroom=0.1)
    scheduler = Scheduler(fleet, DEFAULT_PROFILE)
    active: dict[str, ActiveTask] = {}
    specs = [TaskSpec(name="a", gpu=4, gpu_model="H100"), TaskSpec(name="b", gpu="500m"),
             TaskSpec(name="c", gpu=2), TaskSpec(name="q", gpu=8, gpu_model="T4")]
    for seq, spec in enumerate(specs):
        task = ActiveTask(id=f"id-{spec.name}", name=spec.name, spec=spec,
                          state=TaskState.QUEUED, queue="default", priority=0, seq=seq,
                          created_at=NOW, updated_at=NOW)
        active[task.id] = task
        if spec.name == "q":
            continue
        result = scheduler.schedule(task.request())
        assert result.cluster is not None and scheduler.reserve(task.request(), result).ok
        task.state, task.cluster = TaskState.PLACED, result.cluster
    return Planner(fleet, DEFAULT_PROFILE, active)


def test_a_frozen_planner_answers_as_the_live_one() -> None:
    live = planner()
    frozen = live.frozen()
    assert frozen.n_minus_one() == live.n_minus_one()
    for by in ("cluster", "model", "site", "queue"):
        assert frozen.report(by) == live.report(by)     # type: ignore[arg-type]
    req = FitRequest(gpu=1)
    assert frozen.fit(req) == live.fit(req)


def test_thinking_on_the_frozen_copy_leaves_the_live_view_alone() -> None:
    live = planner()
    before = [r.model_dump() for r in live.fleet.capacity()]
    frozen = live.frozen()
    frozen.fleet.set_cordoned("x", True)
    frozen.fit(FitRequest(gpu=1))
    frozen.n_minus_one()
    assert [r.model_dump() for r in live.fleet.capacity()] == before
    assert not live.fleet.cluster("x").cordoned  # type: ignore[union-attr]
