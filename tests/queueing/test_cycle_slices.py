"""A long placement cycle decides in slices and lets the event loop run between them
(``hub.loops.PlacementLoop.cycle``): other coroutines (heartbeats, reports, REST) are served
before it finishes, each task is still decided once in queue order, and a task cancelled
while the cycle yielded is not placed.

``SLICE_SECONDS`` is set to 0 here, so every decision is a slice of its own: the tests say
what happens between slices, never how long a slice takes.
"""

from __future__ import annotations

import asyncio

import pytest

from fuyao.spec import TaskState
from hub import loops
from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, placed, queue, submit, task


@pytest.fixture
def one_decision_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "SLICE_SECONDS", 0.0)


def gpu_tasks(prefix: str, count: int, **extra: object) -> list[dict[str, object]]:
    return [{"name": f"{prefix}-{i}", "gpu": 1, **extra} for i in range(count)]


def placed_count(h: HubHarness) -> int:
    return sum(t.state == TaskState.PLACED for t in h.hub.tasks.active.values())


async def test_another_coroutine_runs_between_the_slices_of_a_long_cycle(
        quiet: HubHarness, one_decision_slices: None) -> None:
    add_cluster(quiet, "east", nodes=10, gpus=8)
    await submit(quiet, *gpu_tasks("t", 60))
    seen: list[int] = []     # tasks decided (Placed in memory) each time the other ran
    stop = asyncio.Event()

    async def heartbeat() -> None:
        while not stop.is_set():
            seen.append(placed_count(quiet))
            await asyncio.sleep(0)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    assert await quiet.hub.placement.cycle() == 60
    stop.set()
    await beat
    assert any(0 < n < 60 for n in seen), seen    # it ran while the cycle was mid-way
    assert quiet.hub.placement.last_slices > 1
    assert len(placed(quiet)) == 60
    assert {task(quiet, f"t-{i}").generation for i in range(60)} == {1}   # each once
    events = (await quiet.api.get("/api/v1/tasks/t-0")).json()["events"]
    assert [e["kind"] for e in events] == ["Submitted", "Placed"]


async def test_a_task_cancelled_while_the_cycle_yields_is_not_placed(
        quiet: HubHarness, one_decision_slices: None) -> None:
    add_cluster(quiet, "east", nodes=10, gpus=8)
    await submit(quiet, *gpu_tasks("t", 40))
    cancelled: list[int] = []

    async def cancel_the_last() -> None:
        while placed_count(quiet) == 0:
            await asyncio.sleep(0)
        cancelled.append(placed_count(quiet))
        await quiet.hub.tasks.cancel("t-39")     # Cancelled in memory before its write

    canceller = asyncio.create_task(cancel_the_last())
    assert await quiet.hub.placement.cycle() == 39
    await canceller
    assert cancelled and cancelled[0] < 39     # it was cancelled mid-cycle
    assert "t-39" not in placed(quiet)
    stored = (await quiet.api.get("/api/v1/tasks/t-39")).json()
    assert stored["state"] == "Cancelled"


async def test_slices_keep_the_weighted_fair_share_of_one_cycle(
        quiet: HubHarness, one_decision_slices: None) -> None:
    # The same split as tests/queueing/test_order.py, with every decision its own slice.
    add_cluster(quiet, "east", nodes=3, gpus=4)
    await queue(quiet, "team-a", weight=2)
    await queue(quiet, "team-b", weight=1)
    await submit(quiet, *gpu_tasks("b", 12, queue="team-b"),
                 *gpu_tasks("a", 12, queue="team-a"))
    await quiet.hub.placement.cycle()
    won = sorted(name.split("-")[0] for name in placed(quiet))
    assert won.count("a") == 8 and won.count("b") == 4
    assert quiet.hub.placement.last_slices > 1
