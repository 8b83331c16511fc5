"""``GET /api/v1/events`` on one hub without Redis: what a watcher sees, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.hub.conftest import HubHarness


async def events(h: HubHarness, **params: Any) -> dict[str, Any]:
    answer = await h.api.get("/api/v1/events", params={"timeout": 0, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_task_and_cluster_events_in_order_with_resume(harness: HubHarness) -> None:
    start = await events(harness)
    assert start["events"] == [] and start["source"] == "hub"
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    await harness.api.post("/api/v1/tasks", json={"name": "t1", "gpu": 1})
    await harness.api.post("/api/v1/tasks/t1/cancel")
    page = await events(harness, since=start["next"])
    seen = [(e["type"], e["name"], e["kind"]) for e in page["events"]
            if e["kind"] != "Pending"]      # placement may say why it waits
    assert seen == [("cluster", "east", "Joined"), ("task", "t1", "Submitted"),
                    ("task", "t1", "Cancelled")]
    only = await events(harness, since=start["next"], type="task", name="t1")
    kinds = [e["kind"] for e in only["events"]]
    assert [k for k in kinds if k != "Pending"] == ["Submitted", "Cancelled"]
    assert (await events(harness, since=page["next"]))["events"] == []


async def test_a_long_poll_answers_as_soon_as_a_matching_event_is_committed(
        harness: HubHarness) -> None:
    cursor = (await events(harness))["next"]
    poll = asyncio.create_task(harness.api.get(
        "/api/v1/events", params={"since": cursor, "timeout": 20, "name": "late"}))
    await asyncio.sleep(0.2)
    await harness.api.post("/api/v1/tasks", json={"name": "other", "gpu": 1})
    await asyncio.sleep(0.2)
    assert not poll.done()                       # not its task: keeps waiting
    await harness.api.post("/api/v1/tasks", json={"name": "late", "gpu": 1})
    answer = await asyncio.wait_for(poll, 10)
    assert [e["name"] for e in answer.json()["events"]] == ["late"]


async def test_bad_parameters_are_refused(harness: HubHarness) -> None:
    for params in ({"since": "abc"}, {"timeout": 31}, {"type": "node"}, {"limit": 0}):
        answer = await harness.api.get("/api/v1/events", params={"timeout": 0, **params})
        assert answer.status_code == 400, (params, answer.text)
