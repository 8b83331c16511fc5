"""The REST API as a user meets it: status codes, error bodies, nothing changed on bad input."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.conftest import HubHarness


async def submit(h: HubHarness, body: Any) -> Any:
    return await h.api.post("/api/v1/tasks", json=body)


async def test_join_returns_token_once_and_agent_command(harness: HubHarness) -> None:
    r = await harness.api.post("/api/v1/clusters", json={"name": "east", "weight": 3,
                                                         "labels": {"fuyao.io/region": "e"}})
    assert r.status_code == 201
    body = r.json()
    assert body["cluster"] == "east" and body["token"].startswith("fyj_")
    command = body["agent_command"]
    assert "fuyao-agent --hub" in command and "--cluster east" in command
    listed = (await harness.api.get("/api/v1/clusters")).json()
    assert [(c["name"], c["state"], c["weight"], c["headroom"]) for c in listed] == [
        ("east", "Joining", 3, 0.1)]
    assert "token" not in str(listed)
    again = await harness.api.post("/api/v1/clusters", json={"name": "east"})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "Conflict"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        pytest.param({"name": "Bad_Name"}, "name", id="bad-name"),
        pytest.param({"name": "c", "headroom": 1.5}, "headroom", id="headroom>1"),
        pytest.param({"name": "c", "weight": -1}, "weight", id="negative-weight"),
        pytest.param({"name": "c", "colour": "red"}, "colour", id="unknown-field"),
    ],
)
async def test_bad_join_is_400_and_creates_nothing(harness: HubHarness, body: dict[str, Any],
                                                   needle: str) -> None:
    r = await harness.api.post("/api/v1/clusters", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "InvalidInput"
    assert needle in r.json()["error"]["message"]
    assert (await harness.api.get("/api/v1/clusters")).json() == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        pytest.param({"name": "t", "cpu": "-1"}, "negative", id="negative-cpu"),
        pytest.param({"name": "t", "memory": "lots"}, "not a quantity", id="bad-memory"),
        pytest.param({"name": "t", "gpu": 1.5}, "whole", id="fractional-multi-gpu"),
        pytest.param({"name": "t", "selector": "gpu-model >= "}, "selector", id="bad-selector"),
        pytest.param({"name": "t", "gpuz": 1}, "gpuz", id="unknown-field"),
        pytest.param({"name": "t", "duration": "soon"}, "duration", id="bad-duration"),
        pytest.param({"cpu": 1}, "name", id="missing-name"),
    ],
)
async def test_bad_task_is_400_and_stores_nothing(harness: HubHarness, body: dict[str, Any],
                                                  needle: str) -> None:
    r = await submit(harness, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "InvalidInput"
    assert needle in err["message"]
    assert (await harness.api.get("/api/v1/tasks")).json() == []


async def test_malformed_json_is_400(harness: HubHarness) -> None:
    r = await harness.api.post("/api/v1/tasks", content=b"{not json",
                               headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "InvalidInput"


async def test_task_is_stored_queued_and_duplicate_rejected(harness: HubHarness) -> None:
    r = await submit(harness, {"name": "train", "gpu": 2, "gpu_model": ">=A100"})
    assert r.status_code == 201
    assert r.json()["state"] == "Queued"
    dup = await submit(harness, {"name": "train"})
    assert dup.status_code == 409 and "train" in dup.json()["error"]["message"]
    tasks = (await harness.api.get("/api/v1/tasks")).json()
    assert [(t["name"], t["state"], t["cluster"]) for t in tasks] == [("train", "Queued", None)]


async def test_batch_is_all_or_nothing(harness: HubHarness) -> None:
    await submit(harness, {"name": "a"})
    r = await harness.api.post("/api/v1/tasks:batch",
                               json={"tasks": [{"name": "b"}, {"name": "a"}, {"name": "c"}]})
    assert r.status_code == 409
    names = [t["name"] for t in (await harness.api.get("/api/v1/tasks")).json()]
    assert names == ["a"]
    ok = await harness.api.post("/api/v1/tasks:batch", json={"tasks": [{"name": "b"},
                                                                       {"name": "c"}]})
    assert ok.status_code == 201 and [t["name"] for t in ok.json()] == ["b", "c"]


async def test_unknown_names_are_404(harness: HubHarness) -> None:
    for method, path in [("GET", "/api/v1/tasks/nope"), ("POST", "/api/v1/tasks/nope/cancel"),
                         ("GET", "/api/v1/clusters/nope"), ("DELETE", "/api/v1/clusters/nope"),
                         ("POST", "/api/v1/clusters/nope/cordon"),
                         ("GET", "/api/v1/capacity?cluster=nope")]:
        r = await harness.api.request(method, path)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "NotFound"


async def test_cancel_queued_task_then_cancel_again_conflicts(harness: HubHarness) -> None:
    await submit(harness, {"name": "t"})
    r = await harness.api.post("/api/v1/tasks/t/cancel")
    assert r.status_code == 200 and r.json()["state"] == "Cancelled"
    again = await harness.api.post("/api/v1/tasks/t/cancel")
    assert again.status_code == 409
    described = (await harness.api.get("/api/v1/tasks/t")).json()
    kinds = [e["kind"] for e in described["events"]]
    assert kinds[0] == "Submitted" and kinds[-1] == "Cancelled"
    assert set(kinds) <= {"Submitted", "Pending", "Cancelled"}


async def test_cordon_shows_cordoned_and_uncordon_restores(harness: HubHarness) -> None:
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    r = await harness.api.post("/api/v1/clusters/east/cordon")
    assert r.json()["cordoned"] is True
    r = await harness.api.post("/api/v1/clusters/east/uncordon")
    assert r.json()["cordoned"] is False
    audit = harness.hub.store.audit_log()
    assert [a["action"] for a in audit][:3] == ["cluster.uncordon", "cluster.cordon",
                                                "cluster.join"]


async def test_openapi_is_served(harness: HubHarness) -> None:
    spec = (await harness.api.get("/openapi.json")).json()
    assert "/api/v1/tasks" in spec["paths"] and "/api/v1/capacity" in spec["paths"]


async def test_every_mutation_is_audited_with_its_result(harness: HubHarness) -> None:
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    await harness.api.post("/api/v1/clusters", json={"name": "east"})      # refused
    await submit(harness, {"name": "t"})
    await harness.api.post("/api/v1/tasks/t/cancel")
    await harness.api.post("/api/v1/tasks/t/cancel")                      # refused
    await harness.api.delete("/api/v1/clusters/east")
    log = [(a["action"], a["target"], a["result"]) for a in harness.hub.store.audit_log()]
    assert log[::-1] == [
        ("cluster.join", "east", "ok"),
        ("cluster.join", "east",
         "refused: cluster 'east' already exists; remove it first to join it again"),
        ("task.submit", "t", "ok"),
        ("task.cancel", "t", "ok"),
        ("task.cancel", "t", "refused: task 't' already ended (Cancelled); nothing to cancel"),
        ("cluster.remove", "east", "ok, 0 tasks requeued"),
    ]


async def test_a_submit_is_audited_once_whether_stored_or_refused_by_the_store(
        harness: HubHarness) -> None:
    await submit(harness, {"name": "a"})
    batch = {"tasks": [{"name": "b"}, {"name": "a"}]}      # "a" is taken: nothing stored
    r = await harness.api.post("/api/v1/tasks:batch", json=batch)
    assert r.status_code == 409
    log = [(a["action"], a["target"], a["result"]) for a in harness.hub.store.audit_log()]
    assert log[::-1] == [("task.submit", "a", "ok"),
                         ("task.submit", "b,a", f"refused: {r.json()['error']['message']}")]
    assert [t["name"] for t in (await harness.api.get("/api/v1/tasks")).json()] == ["a"]


async def test_state_filter_answers_from_the_hubs_live_view(harness: HubHarness) -> None:
    await submit(harness, {"name": "a"})
    await submit(harness, {"name": "b"})
    await harness.api.post("/api/v1/tasks/b/cancel")
    queued = (await harness.api.get("/api/v1/tasks", params={"state": "Queued"})).json()
    assert [t["name"] for t in queued] == ["a"]
    cancelled = (await harness.api.get("/api/v1/tasks", params={"state": "Cancelled"})).json()
    assert [t["name"] for t in cancelled] == ["b"]
    bad = await harness.api.get("/api/v1/tasks", params={"state": "Sleeping"})
    assert bad.status_code == 400


async def test_audit_endpoint_lists_newest_first(harness: HubHarness) -> None:
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    await submit(harness, {"name": "t"})
    entries = (await harness.api.get("/api/v1/audit", params={"limit": 1})).json()
    assert [(e["action"], e["target"], e["result"], e["actor"]) for e in entries] == [
        ("task.submit", "t", "ok", "admin")]
    assert (await harness.api.get("/api/v1/audit", params={"limit": 0})).status_code == 400
