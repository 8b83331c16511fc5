"""``fuyao_tasks{state}`` on ``/metrics`` says what a user counts from the task list.

The gauge is read from counts the hub's map of active tasks keeps as tasks change
(``ActiveTasks.states``), not from a scan at each scrape; here a real hub takes tasks through
Queued, Placed, Running, Succeeded and Cancelled, and after each step the scraped values
equal the active states counted from ``GET /api/v1/tasks``, with no line for a state no task
is in.
"""

from __future__ import annotations

from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from fuyao.spec import TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from tests.hub.conftest import HubHarness
from tests.hub.test_lifecycle_review import A100, gpu_node, ready_agent, running, until

ACTIVE = {TaskState.QUEUED.value, TaskState.PLACED.value, TaskState.RUNNING.value}


def scraped(h: HubHarness) -> dict[str, float]:
    """The ``fuyao_tasks`` samples of one scrape, by state."""
    text = h.hub.metrics.render().decode()
    return {s.labels["state"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "fuyao_tasks"}


async def counted(h: HubHarness) -> dict[str, float]:
    """What a user counts: the task list's active tasks by state."""
    tasks = (await h.api.get("/api/v1/tasks")).json()
    return {state: float(n) for state, n in
            Counter(t["state"] for t in tasks if t["state"] in ACTIVE).items()}


async def agrees(h: HubHarness) -> dict[str, float]:
    """The scrape, once it equals the user's count (both are read between the same awaits)."""
    seen = scraped(h)
    assert seen == await counted(h)
    return seen


async def test_scraped_task_counts_equal_the_task_lists(harness: HubHarness) -> None:
    h = harness
    assert await agrees(h) == {}
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 2)])
    first = await running(h, east, "first", "a-0", gpu=1)
    assert await agrees(h) == {"Running": 1.0}
    r = await h.api.post("/api/v1/tasks:batch",
                         json={"tasks": [{"name": "p", "gpu": 1}, {"name": "q1", "gpu": 4},
                                            {"name": "q2", "gpu": 4}]})
    assert r.status_code == 201, r.text
    place = (await east.expect("place")).place    # p takes a GPU; q1, q2 fit no node: wait
    await until(lambda: h.hub.tasks.by_name("p").state == TaskState.PLACED)
    assert await agrees(h) == {"Queued": 2.0, "Placed": 1.0, "Running": 1.0}
    assert (await h.api.post("/api/v1/tasks/q2/cancel")).status_code == 200
    assert await agrees(h) == {"Queued": 1.0, "Placed": 1.0, "Running": 1.0}
    east.report(place.task_id, place.generation, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(lambda: h.hub.tasks.by_name("p").state == TaskState.RUNNING)
    assert await agrees(h) == {"Queued": 1.0, "Running": 2.0}
    east.report(first.task_id, first.generation, pb.TASK_PHASE_SUCCEEDED, node="a-0")
    await until(lambda: h.hub.tasks.by_name("first") is None)
    assert await agrees(h) == {"Queued": 1.0, "Running": 1.0}
    await east.close()
