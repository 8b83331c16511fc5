"""The placement loop is pipelined (``hub.loops``): a cycle's commit is queued and the next
cycle may decide while it is in flight, yet a PlaceTask still goes out only once the
placement is durable, and a commit that fails puts its tasks back in the queue, placed again
by a later cycle with a new generation, never run twice.
"""

from __future__ import annotations

import asyncio

import pytest

from fuyao.spec import TaskState
from tests.hub import test_lifecycle_review
from tests.hub.conftest import HubHarness
from tests.hub.test_lifecycle_review import (
    A100,
    Gate,
    Outage,
    gate,
    gpu_node,
    ready_agent,
    until,
    writes_state,
)

gates = test_lifecycle_review.gates   # the fixture: every gate opened before the hub stops


async def submit(h: HubHarness, *names: str) -> None:
    r = await h.api.post("/api/v1/tasks:batch",
                         json={"tasks": [{"name": n, "gpu": 1} for n in names]})
    assert r.status_code == 201, r.text


async def stored_state(h: HubHarness, name: str) -> str:
    rec = await h.hub.writer.read(h.hub.store.get_task, name)
    return rec.state


async def test_a_place_task_waits_for_its_commit_while_the_next_cycle_may_decide(
        harness: HubHarness, gates: list[Gate]) -> None:
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    commit = gate(h, gates, "apply", writes_state("Placed"))
    await submit(h, "first")
    await until(commit.entered.is_set)
    assert h.hub.tasks.by_name("first").state == TaskState.PLACED     # decided, in memory
    assert await stored_state(h, "first") == "Queued"                  # not durable yet
    # The decision lock is free while the commit is in flight: a cycle can decide now.
    assert not h.hub.placement.deciding()
    with pytest.raises(TimeoutError):
        await east.expect("place", timeout=0.3)
    commit.open()
    place = (await east.expect("place", timeout=10)).place
    assert (place.name, place.generation) == ("first", 1)
    assert await stored_state(h, "first") == "Placed"
    await east.close()


async def test_a_failed_commit_requeues_its_tasks_and_a_later_cycle_places_them(
        harness: HubHarness) -> None:
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    outage = Outage(h, writes_state("Placed"))
    await submit(h, "again")
    await until(lambda: outage.failures >= 2)     # the merged commit, then it alone
    await until(lambda: h.hub.tasks.by_name("again").state == TaskState.QUEUED)
    outage.on = False
    place = (await east.expect("place", timeout=10)).place
    assert place.name == "again" and place.generation == 1   # the failed one never went out
    assert await stored_state(h, "again") == "Placed"
    with pytest.raises(TimeoutError):                          # and it is sent once
        await asyncio.wait_for(east.expect("place", timeout=0.5), 1)
    await east.close()
