"""``task explain``, ``task list`` and ``task describe`` as text: where a task stands in its
queue and which quota holds it, read as a user would say it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fuyao.insight import ExplainView, NearestFit
from fuyao.spec import TaskSpec, TaskState, TaskView
from fuyaoctl.render import Renderer
from fuyaoctl.render_insight import InsightRenderer


def test_explain_shows_the_queue_place_quota_use_and_what_holds_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    view = ExplainView(
        task="big", state="Queued", message="queue team-a: gpu quota 8, in use 8",
        summary="the fleet has room on east, but queue team-a: gpu quota 8, in use 8",
        queue={"queue": "team-a", "position": 3, "held_by": "queue team-a: gpu quota 8, in use 8",
               "quotas": {"gpu": "8", "cpu": "64"}, "borrow": {"gpu": "4"},
               "usage": {"gpu": "8"}, "reserved_cluster": "east", "preempting": ["low-1"]},
        nearest_fit=NearestFit(change={"queue": "default"}, cluster="east", cost=0.25,
                               description="in queue default instead of team-a"),
    )
    InsightRenderer("table").explain(view)
    out = capsys.readouterr().out
    assert "Queue:        team-a #3" in out
    assert "Quota:        gpu 8 +4 borrow (in use 8); cpu 64 (in use 0)" in out
    assert "Held by:      queue team-a: gpu quota 8, in use 8" in out
    assert "Kept for it:  cluster east" in out
    assert "Preempting:   low-1" in out
    assert "Nearest fit: in queue default instead of team-a -> east" in out


def test_explain_of_a_task_in_a_queue_without_quota_has_no_quota_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    view = ExplainView(task="t", state="Queued", queue={
        "queue": "default", "position": 1, "held_by": None, "quotas": {}, "usage": {}})
    InsightRenderer("table").explain(view)
    out = capsys.readouterr().out
    assert "Queue:    default #1" in out and "Quota:" not in out and "Kept" not in out


def test_task_list_and_describe_show_the_queue_position_and_the_quota_holding_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    held = "queue team-a: gpu A100 quota 16, in use 16"
    now = datetime.now(UTC)
    waiting = TaskView(id="1", name="big", state=TaskState.QUEUED, queue="team-a",
                       message=held, spec=TaskSpec(name="big", gpu=8), created_at=now,
                       updated_at=now, queue_position=2, held_by=held)
    running = TaskView(id="2", name="small", state=TaskState.RUNNING, queue="team-a",
                       cluster="east", spec=TaskSpec(name="small", gpu=1), created_at=now,
                       updated_at=now)
    renderer = Renderer("table")
    renderer.tasks([waiting, running])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "team-a #2" in rows["big"] and held in rows["big"]
    assert "team-a #" not in rows["small"]
    renderer.task(waiting)
    out = capsys.readouterr().out
    assert "Queue:       team-a #2" in out and f"Held by:     {held}" in out
