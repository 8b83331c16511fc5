"""``/api/v1/queues`` and submits naming a queue: what a user sees, errors included."""

from __future__ import annotations

import pytest

from tests.hub.conftest import HubHarness
from tests.queueing.conftest import queue, submit


async def test_default_queue_always_exists_and_cannot_be_deleted(quiet: HubHarness) -> None:
    listed = (await quiet.api.get("/api/v1/queues")).json()
    assert [(q["name"], q["quotas"], q["weight"]) for q in listed] == [("default", {}, 1)]
    r = await quiet.api.delete("/api/v1/queues/default")
    assert r.status_code == 409 and "cannot be deleted" in r.json()["error"]["message"]


async def test_create_describe_update_delete(quiet: HubHarness) -> None:
    r = await quiet.api.post("/api/v1/queues", json={
        "name": "team-a", "weight": 2, "quotas": {"gpu": 8, "cpu": "64"},
        "cluster_quotas": {"east": {"gpu": "4"}}})
    assert r.status_code == 201, r.text
    view = r.json()
    assert (view["quotas"], view["weight"], view["cluster_quotas"]) == (
        {"gpu": "8", "cpu": "64"}, 2, {"east": {"gpu": "4"}})
    again = await quiet.api.post("/api/v1/queues", json={"name": "team-a"})
    assert again.status_code == 409
    r = await quiet.api.patch("/api/v1/queues/team-a", json={"borrow": {"gpu": 2},
                                                             "priority": 5})
    assert r.status_code == 200 and r.json()["borrow"] == {"gpu": "2"}
    assert r.json()["quotas"] == {"gpu": "8", "cpu": "64"} and r.json()["priority"] == 5
    assert (await quiet.api.delete("/api/v1/queues/team-a")).json() == {"deleted": "team-a"}
    assert (await quiet.api.get("/api/v1/queues/team-a")).status_code == 404
    audit = (await quiet.api.get("/api/v1/audit")).json()
    assert [a["action"] for a in audit if a["action"].startswith("queue.")] == [
        "queue.delete", "queue.update", "queue.create", "queue.create"]


@pytest.mark.parametrize(("body", "status", "text"), [
    ({"name": "q", "quotas": {"gpu": "-1"}}, 400, "gpu quantity '-1' must not be negative"),
    ({"name": "q", "quotas": {"tpu": 1}}, 400, "unknown resource 'tpu'"),
    ({"name": "q", "weight": 0}, 400, "weight"),
    ({"name": "Q"}, 400, "queue name 'Q'"),
    ({"name": "q", "colour": "red"}, 400, "colour"),
])
async def test_bad_queues_are_refused_and_change_nothing(
        quiet: HubHarness, body: dict[str, object], status: int, text: str) -> None:
    r = await quiet.api.post("/api/v1/queues", json=body)
    assert r.status_code == status and text in r.json()["error"]["message"], r.text
    assert [q["name"] for q in (await quiet.api.get("/api/v1/queues")).json()] == ["default"]


async def test_a_task_naming_a_missing_queue_is_refused(quiet: HubHarness) -> None:
    r = await quiet.api.post("/api/v1/tasks", json={"name": "t", "queue": "nope"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("queue(s) not found: nope (nothing")
    assert (await quiet.api.get("/api/v1/tasks")).json() == []


async def test_a_queue_with_tasks_cannot_be_deleted(quiet: HubHarness) -> None:
    await queue(quiet, "team-a")
    await submit(quiet, {"name": "t1", "queue": "team-a"}, {"name": "t2", "queue": "team-a"})
    r = await quiet.api.delete("/api/v1/queues/team-a")
    assert r.status_code == 409
    assert "2 task(s) that have not ended: t1, t2" in r.json()["error"]["message"]


async def test_queues_survive_a_restart(tmp_path: object) -> None:
    from pathlib import Path

    from tests.hub.conftest import start_harness, stop_harness
    home = Path(str(tmp_path)) / "hub"
    h = await start_harness(home)
    await queue(h, "team-b", quotas={"gpu": 4}, borrow={"gpu": 4})
    await stop_harness(h)
    h = await start_harness(home)
    try:
        view = (await h.api.get("/api/v1/queues/team-b")).json()
        assert (view["quotas"], view["borrow"]) == ({"gpu": "4"}, {"gpu": "4"})
    finally:
        await stop_harness(h)
