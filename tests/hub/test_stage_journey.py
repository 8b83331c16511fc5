"""``fuyao_task_stage_seconds`` accounts for a task's whole wait, the submit's commit first.

A real hub takes one task from a REST submit to a Running report; its stage histogram then
holds one observation of every stage, the ``store`` span (the submit's own commit) no
longer than the POST that made it took, and the stages add up to the time between the
task's ``Submitted`` and ``Running`` events, which the hub stamps itself.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from fuyao.spec import TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.stages import STAGES
from tests.hub.conftest import HubHarness
from tests.hub.test_lifecycle_review import A100, gpu_node, ready_agent, until


async def test_the_stages_add_up_to_the_submit_to_running_wait(harness: HubHarness) -> None:
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 2)])
    posted = time.perf_counter()
    r = await h.api.post("/api/v1/tasks", json={"name": "t", "gpu": 1})
    posting = time.perf_counter() - posted
    assert r.status_code == 201, r.text
    place = (await east.expect("place")).place
    east.report(place.task_id, place.generation, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(lambda: h.hub.tasks.by_name("t").state == TaskState.RUNNING)

    registry = h.hub.metrics.registry

    def sample(name: str, stage: str) -> float:
        value = registry.get_sample_value(f"fuyao_task_stage_seconds_{name}", {"stage": stage})
        assert value is not None, (name, stage)
        return value

    assert STAGES[:2] == ("store", "queue")
    assert [sample("count", stage) for stage in STAGES] == [1.0] * len(STAGES)
    assert 0.0 < sample("sum", "store") <= posting
    events: dict[str, str] = {}

    async def running_event() -> bool:
        view = (await h.api.get("/api/v1/tasks/t")).json()
        events.update({e["kind"]: e["at"] for e in view["events"]})
        return "Running" in events

    for _ in range(100):    # the Running event is written a moment after the state changes
        if await running_event():
            break
        await asyncio.sleep(0.05)
    waited = (datetime.fromisoformat(events["Running"])
              - datetime.fromisoformat(events["Submitted"])).total_seconds()
    total = sum(sample("sum", stage) for stage in STAGES)
    assert abs(total - waited) < 0.05, (total, waited)
    await east.close()
