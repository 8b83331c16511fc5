"""The REST routes think on a frozen copy in a worker thread: it must answer as the live
view does, and leave the live view alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from fuyao.capacity import FitRequest
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.config import Timings
from hub.placement import DEFAULT_PROFILE, Scheduler
from hub.planning.history import SAMPLE_SHARE, CapacityHistory
from hub.planning.planner import Planner
from hub.planning.snapshot import copy_fleet_stepwise
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


def test_report_groupings_add_up() -> None:
    live = planner()
    for name in ("x", "y"):
        c = live.fleet.cluster(name)
        assert c is not None
        live.fleet.upsert_cluster(name, labels={"fuyao.io/site": "sh-1"}, weight=1,
                                  headroom=c.headroom, state=c.state)
    by_cluster = live.report("cluster").rows
    by_site = {(r.group, r.model): r for r in live.report("site").rows}
    for model in ("H100", "T4"):
        rows = [r for r in by_cluster if r.model == model]
        site = by_site[("sh-1", model)]
        assert site.devices_total == sum(r.devices_total for r in rows)
        assert site.devices_allocated == sum(r.devices_allocated for r in rows)
    assert by_site[("sh-1", "H100")].devices_total == 16
    queues = live.report("queue").rows
    assert {r.group for r in queues} == {"default"}
    assert sum(r.devices_allocated for r in queues) == 4 + 0.5 + 2     # a, b, c
    assert sum(r.queued_devices for r in queues) == 8 and sum(r.queued_tasks for r in queues) == 1
    fleet = {r.model: r for r in live.report("model").rows}
    assert (fleet["H100"].devices_total, fleet["T4"].devices_total) == (16, 4)
    assert fleet["T4"].queued_devices == 8          # q wants 8 T4: "could run" there


async def test_a_planner_frozen_a_cluster_at_a_time_answers_as_the_live_one() -> None:
    live = planner()
    frozen = await live.frozen_stepwise()
    assert frozen.n_minus_one() == live.n_minus_one()
    for by in ("cluster", "model", "site", "queue"):
        assert frozen.report(by) == live.report(by)     # type: ignore[arg-type]
    assert frozen.fit(FitRequest(gpu=1)) == live.fit(FitRequest(gpu=1))
    assert frozen.fleet.capacity() == live.fleet.capacity()


async def test_the_hub_loop_runs_between_clusters_while_the_fleet_is_copied() -> None:
    """The copy for the capacity sample and the REST answers does not hold the loop for the
    whole fleet: other work runs between clusters, and a cluster removed meanwhile is left
    out (not copied as it was)."""
    fleet = fleet_of({f"c{i}": [node(f"c{i}n", "H100", 8)] for i in range(6)})
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            if turns == 2:
                fleet.remove_cluster("c5")
            await asyncio.sleep(0)

    task = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    copied = await copy_fleet_stepwise(fleet)
    task.cancel()
    assert turns >= 5
    assert [c.name for c in copied.clusters()] == [f"c{i}" for i in range(5)]
    assert copied.capacity("c0") == fleet.capacity("c0")


def test_a_slow_capacity_sample_stretches_the_pause_to_keep_its_share() -> None:
    history = CapacityHistory(planner(), None, Timings(capacity_sample_interval=60.0))  # type: ignore[arg-type]
    assert history.pause(0.2) == 60.0
    assert history.pause(10.0) == pytest.approx(190.0)      # 10 s in every 200: 5%
    assert history.pause(10.0) * SAMPLE_SHARE <= 10.0


async def test_a_capacity_sample_reads_the_live_view_a_cluster_at_a_time() -> None:
    """The sample's rows: capacity, fragmented devices and queued demand per cluster and
    model, read while other work runs between clusters; a cluster removed meanwhile is left
    out."""
    live = planner()
    history = CapacityHistory(live, None, Timings())  # type: ignore[arg-type]
    rows = {(r.cluster, r.model): r for r in await history.snapshot_stepwise(NOW)}
    assert set(rows) == {("x", "H100"), ("x", "T4"), ("y", "H100")}
    assert (rows[("x", "T4")].queued_tasks, rows[("x", "T4")].queued_devices) == (1, 8.0)
    assert rows[("y", "H100")].queued_tasks == 0
    for row in live.fleet.capacity():
        assert rows[(row.cluster, row.model)].devices_free == row.devices_free
    report = {r.group: r for r in live.report("cluster").rows}
    assert rows[("y", "H100")].devices_fragmented == round(report["y"].devices_fragmented, 3)

    async def other_work() -> None:    # runs once the sample has read "x" and yielded
        live.fleet.remove_cluster("y")

    task = asyncio.create_task(other_work())
    sampled = await history.snapshot_stepwise(NOW)
    assert task.done() and {r.cluster for r in sampled} == {"x"}
