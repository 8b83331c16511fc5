"""The planning endpoints on the real hub (in process): fit with queue quotas and
ComputeProfiles, N-1 and the report, history input bounds, and the web view's files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fuyao.spec import ClusterState
from tests.hub.conftest import HubHarness, start_harness, stop_harness
from tests.placement.builders import node


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[HubHarness]:
    """A hub whose fleet view holds cluster ``a``: two nodes of 8 H100, no headroom."""
    harness = await start_harness(tmp_path / "hub")
    fleet = harness.hub.fleet
    fleet.upsert_cluster("a", labels={}, weight=1, headroom=0.0, state=ClusterState.READY)
    fleet.replace_nodes("a", [node("a1", "H100", 8), node("a2", "H100", 8)])
    try:
        yield harness
    finally:
        await stop_harness(harness)


async def test_fit_counts_through_rest(h: HubHarness) -> None:
    r = await h.api.post("/api/v1/capacity/fit", json={"gpu": 1})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["total"], answer["clusters"], answer["capped"]) == (16, {"a": 16}, False)
    assert set(answer["limited_by"]) == {"a"}


async def test_a_queue_quota_bounds_the_count(h: HubHarness) -> None:
    made = await h.api.post("/api/v1/queues", json={"name": "capped", "quotas": {"gpu": 3}})
    assert made.status_code == 201, made.text
    r = await h.api.post("/api/v1/capacity/fit", json={"gpu": 1, "queue": "capped"})
    assert r.json()["total"] == 3
    assert r.json()["limited_by"]["quota"] == "queue capped quota admits 3 more"
    # a default-queue count is not bounded by another queue's quota
    r = await h.api.post("/api/v1/capacity/fit", json={"gpu": 1})
    assert r.json()["total"] == 16
    missing = await h.api.post("/api/v1/capacity/fit", json={"gpu": 1, "queue": "nope"})
    assert missing.status_code == 404 and "queue 'nope' not found" in missing.text


async def test_a_compute_profile_gives_the_shape(h: HubHarness) -> None:
    body = {"name": "llm", "template": {"gpu": 8, "gpu_model": "H100"}}
    assert (await h.api.put("/api/v1/profiles/llm", json=body)).status_code == 200
    r = await h.api.post("/api/v1/capacity/fit", json={"profile": "llm"})
    assert r.json()["total"] == 2
    r = await h.api.post("/api/v1/capacity/fit", json={"profile": "llm", "gpu": 4})
    assert r.json()["total"] == 4                         # the request's own gpu wins
    unknown = await h.api.post("/api/v1/capacity/fit", json={"profile": "nope"})
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["message"]


@pytest.mark.parametrize(("body", "field"), [
    ({"gpu": "lots"}, "gpu"), ({"replicas": 0}, "replicas"), ({"limit": 10**9}, "limit"),
    ({"cpu": 1, "colour": "red"}, "colour"), ({"selector": "x in ("}, "selector"),
])
async def test_bad_fit_requests_are_400(h: HubHarness, body: dict[str, object],
                                        field: str) -> None:
    r = await h.api.post("/api/v1/capacity/fit", json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]


async def test_n_minus_one_and_report(h: HubHarness) -> None:
    n1 = (await h.api.get("/api/v1/capacity/n-1")).json()
    assert n1["safe"] is True and n1["clusters"]["a"]["tasks"] == 0
    report = (await h.api.get("/api/v1/capacity/report", params={"by": "model"})).json()
    assert [(r["group"], r["model"], r["devices_total"]) for r in report["rows"]] == [
        ("fleet", "H100", 16)]
    assert report["shapes_from"] == "default"
    custom = await h.api.post("/api/v1/capacity/report",
                              json={"shapes": [{"gpu": 16, "weight": 1}]})
    assert custom.json()["rows"][0]["devices_fragmented"] == 16     # never fits a node
    assert (await h.api.get("/api/v1/capacity/report", params={"by": "rack"})).status_code == 400
    assert (await h.api.get("/api/v1/capacity/report",
                            params={"cluster": "nope"})).status_code == 404


@pytest.mark.parametrize("since", ["0s", "500d", "soon", "1" * 20])
async def test_history_bounds_its_window(h: HubHarness, since: str) -> None:
    r = await h.api.get("/api/v1/capacity/history", params={"since": since})
    assert r.status_code == 400, r.text


async def test_history_returns_samples_taken(h: HubHarness) -> None:
    await h.hub.history.sample()
    points = (await h.api.get("/api/v1/capacity/history", params={"since": "1h"})).json()
    assert [(p["cluster"], p["model"], p["devices_total"]) for p in points] == [
        ("a", "H100", 16)]


async def test_the_web_view_is_served_and_nothing_else(h: HubHarness) -> None:
    page = await h.api.get("/ui")
    assert page.status_code == 200 and "/ui/static/app.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = await h.api.get("/ui/static/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "Authorization" in script.text and "sessionStorage" in script.text
    for name in ("index.py", "..%2F__init__.py", "nope.js"):
        assert (await h.api.get(f"/ui/static/{name}")).status_code == 404
