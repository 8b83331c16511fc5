"""Bounded and same-site requests: body limit (413), JSON content type on mutations (415),
foreign Origins (403), the error envelope for unknown routes and methods, request ids; task
delete, retention and paginated lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fuyao.errors import InvalidInput
from hub.config import HubConfig, Timings, check_config, load_config_file
from tests.hub.conftest import HubHarness


async def test_oversized_body_is_413_and_stores_nothing(harness: HubHarness) -> None:
    big = {"name": "big", "command": ["x" * 1000] * 5000}
    r = await harness.api.post("/api/v1/tasks", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "PayloadTooLarge"
    assert (await harness.api.get("/api/v1/tasks")).json() == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", ""])
async def test_mutation_without_json_content_type_is_415(harness: HubHarness,
                                                         content_type: str) -> None:
    r = await harness.api.post("/api/v1/clusters", content=b'{"name": "east"}',
                               headers={"Content-Type": content_type})
    assert r.status_code == 415
    assert r.json()["error"]["code"] == "UnsupportedMediaType"
    assert (await harness.api.get("/api/v1/clusters")).json() == []


async def test_foreign_origin_is_refused_own_origin_is_not(harness: HubHarness) -> None:
    r = await harness.api.post("/api/v1/clusters", json={"name": "east"},
                               headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "cross-origin" in r.json()["error"]["message"]
    r = await harness.api.post("/api/v1/clusters", json={"name": "east"},
                               headers={"Origin": "http://hub"})
    assert r.status_code == 201


async def test_unknown_route_and_method_answer_in_the_error_envelope(
        harness: HubHarness) -> None:
    r = await harness.api.get("/api/v1/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NotFound"
    r = await harness.api.put("/api/v1/tasks")
    assert r.status_code == 405 and r.json()["error"]["code"] == "MethodNotAllowed"


async def test_request_id_is_echoed_or_made(harness: HubHarness) -> None:
    r = await harness.api.get("/api/v1/clusters", headers={"X-Request-Id": "abc-1"})
    assert r.headers["x-request-id"] == "abc-1"
    r = await harness.api.get("/api/v1/clusters", headers={"X-Request-Id": "bad id!"})
    assert len(r.headers["x-request-id"]) == 32


async def test_task_delete_frees_the_name_only_once_ended(harness: HubHarness) -> None:
    await harness.api.post("/api/v1/tasks", json={"name": "t"})
    r = await harness.api.delete("/api/v1/tasks/t")
    assert r.status_code == 409 and "cancel it first" in r.json()["error"]["message"]
    await harness.api.post("/api/v1/tasks/t/cancel")
    assert (await harness.api.delete("/api/v1/tasks/t")).json() == {"deleted": "t"}
    assert (await harness.api.get("/api/v1/tasks/t")).status_code == 404
    assert (await harness.api.delete("/api/v1/tasks/t")).status_code == 404
    assert (await harness.api.post("/api/v1/tasks", json={"name": "t"})).status_code == 201
    audit = harness.hub.store.audit_log(action="task.delete")
    assert [(a["target"], a["result"][:7]) for a in audit] == [
        ("t", "refused"), ("t", "ok"), ("t", "refused")]


async def test_retention_deletes_only_tasks_ended_long_ago(harness: HubHarness) -> None:
    for name in ("old", "live"):
        await harness.api.post("/api/v1/tasks", json={"name": name})
    await harness.api.post("/api/v1/tasks/old/cancel")
    retention = harness.hub.retention
    assert await retention.sweep() == 0          # ended just now: kept
    later = datetime.now(UTC) + timedelta(seconds=retention.retain_seconds + 1)
    assert await retention.sweep(now=later) == 1
    names = [t["name"] for t in (await harness.api.get("/api/v1/tasks")).json()]
    assert names == ["live"]
    [entry] = harness.hub.store.audit_log(limit=1)
    assert (entry["actor"], entry["action"], entry["target"]) == ("system", "task.delete", "old")


@pytest.mark.parametrize("state", [None, "Queued", "Cancelled"])
async def test_lists_come_in_pages(harness: HubHarness, state: str | None) -> None:
    batch = {"tasks": [{"name": f"t{i:02}"} for i in range(7)]}
    assert (await harness.api.post("/api/v1/tasks:batch", json=batch)).status_code == 201
    if state == "Cancelled":
        for i in range(7):
            await harness.api.post(f"/api/v1/tasks/t{i:02}/cancel")
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        params = {"limit": "3", **({"state": state} if state else {}),
                  **({"continue": token} if token else {})}
        r = await harness.api.get("/api/v1/tasks", params=params)
        seen += [t["name"] for t in r.json()]
        pages += 1
        token = r.headers.get("x-continue")
        if token is None:
            break
    assert seen == [f"t{i:02}" for i in range(7)] and pages == 3
    r = await harness.api.get("/api/v1/tasks", params={"continue": "nope"})
    assert r.status_code == 400
    assert (await harness.api.get("/api/v1/tasks", params={"limit": "1001"})).status_code == 400


def test_config_with_not_ready_before_unknown_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hub.yaml"
    path.write_text("timings: {unknown_after: 30s, not_ready_after: 10s}\n")
    with pytest.raises(InvalidInput, match=r"not_ready_after .* must not be shorter"):
        load_config_file(path, HubConfig(home=tmp_path))
    with pytest.raises(InvalidInput, match="number of seconds"):
        check_config(HubConfig(home=tmp_path, timings=Timings(monitor_interval=-1)))
    path.write_text("max_body_bytes: 10\n")
    with pytest.raises(InvalidInput, match="max_body_bytes"):
        load_config_file(path, HubConfig(home=tmp_path))
