"""A lost cluster's tasks are re-queued in one store write per batch, all or none."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuyao.errors import Transient
from fuyao.wire.v1 import agent_pb2 as pb
from hub.store import EventRecord
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import FAST, HubHarness, start_harness, stop_harness
from tests.hub.test_agent_channel import ready_agent, task, until

TASKS = 30


async def lost_with(h: HubHarness) -> RawAgent:
    """East runs TASKS tasks (submitted in one batch), then goes silent; west stays."""
    east = await ready_agent(h, "east", [gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8,
                                                  cpu=512)], weight=10)
    r = await h.api.post("/api/v1/tasks:batch", json={"tasks": [
        {"name": f"t{i}", "cpu": "1"} for i in range(TASKS)]})
    assert r.status_code == 201, r.text
    for _ in range(TASKS):
        place = (await east.expect("place")).place
        east.report(place.task_id, place.generation, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(h, lambda: all(t.state.value == "Running" and t.cluster == "east"
                               for t in h.hub.tasks.active.values()))
    return east


def spy_on_writes(h: HubHarness, fail_first: bool = False) -> list[list[str]]:
    """Event kinds of every store transaction that carried a ``Requeued`` event; with
    ``fail_first`` the first two such transactions fail as a store outage would (the
    writer's merged commit, then its retry of the batch alone: the evictor sees it fail)."""
    calls: list[list[str]] = []
    real = h.hub.store.apply

    def apply(updates: Sequence[Any] = (), events: Sequence[EventRecord] = (),
              placements: Sequence[Any] = ()) -> None:
        kinds = [e.kind for e in events]
        if "Requeued" in kinds:
            calls.append(kinds)
            if fail_first and len(calls) <= 2:
                raise Transient("store unavailable (test)")
        real(updates, events, placements)

    h.hub.store.apply = apply  # type: ignore[method-assign]
    return calls


async def moved_to_west(h: HubHarness) -> None:
    await until(h, lambda: all(t.cluster == "west" for t in h.hub.tasks.active.values()),
                timeout=20)


async def test_a_lost_clusters_tasks_are_requeued_in_one_write(tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", timings=FAST)
    try:
        west = await ready_agent(h, "west", [gpu_node("b-0", "NVIDIA-A100-PCIE-40GB", 8,
                                                      cpu=512)])
        east = await lost_with(h)
        calls = spy_on_writes(h)
        await east.close()
        await moved_to_west(h)
        assert len(calls) == 1 and calls[0].count("Requeued") == TASKS
        await west.close()
    finally:
        await stop_harness(h)


async def test_a_failed_failover_write_moves_none_and_the_next_tick_moves_all(
        tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", timings=FAST)
    try:
        west = await ready_agent(h, "west", [gpu_node("b-0", "NVIDIA-A100-PCIE-40GB", 8,
                                                      cpu=512)])
        east = await lost_with(h)
        calls = spy_on_writes(h, fail_first=True)
        await east.close()
        await moved_to_west(h)
        assert len(calls) >= 3   # two failed, then the next tick's write moved them
        for i in range(TASKS):   # each moved exactly once: generation 2, one Requeued event
            view = await task(h, f"t{i}")
            assert view["generation"] == 2
            assert [e["kind"] for e in view["events"]].count("Requeued") == 1
        await west.close()
    finally:
        await stop_harness(h)
