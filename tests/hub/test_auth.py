"""REST identities: tokens (shown once, hashed, expiring, revocable, last use), roles and
submitter scope, rate limit, the first admin token, the open mode, and audit records."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from fuyao.errors import InvalidInput, Transient
from hub.api import create_app, create_health_app
from hub.auth.service import check_auth_mode
from hub.auth.tokens import hash_token, verify_token
from hub.config import HubConfig
from tests.hub.conftest import FAST, HubHarness, auth_headers, start_harness, stop_harness


async def token(h: HubHarness, name: str, role: str, **extra: Any) -> httpx.AsyncClient:
    """A client holding a new token."""
    r = await h.api.post("/api/v1/auth/tokens", json={"name": name, "role": role, **extra})
    assert r.status_code == 201, r.text
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(h.hub)),
                             base_url="http://hub", headers=auth_headers(r.json()["token"]))


def raw(h: HubHarness, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(h.hub)),
                             base_url="http://hub", headers=headers)


async def test_first_start_writes_an_admin_token_only_its_owner_can_read(
        harness: HubHarness) -> None:
    home = harness.hub.config.home
    path = home / "admin.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "fuyao.db").stat().st_mode) == 0o600
    who = (await harness.api.get("/api/v1/auth/whoami")).json()
    assert who == {"name": "admin", "role": "admin", "queues": [], "auth": "token"}


async def test_a_restart_keeps_the_admin_token(tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", FAST)
    first = (tmp_path / "hub" / "admin.token").read_text()
    await stop_harness(h)
    h = await start_harness(tmp_path / "hub", FAST)
    try:
        assert (tmp_path / "hub" / "admin.token").read_text() == first
        assert (await h.api.get("/api/v1/auth/whoami")).status_code == 200
    finally:
        await stop_harness(h)


async def test_token_is_shown_once_stored_slow_hashed_and_listed_without_secret(
        harness: HubHarness) -> None:
    r = await harness.api.post("/api/v1/auth/tokens",
                               json={"name": "ci-bot", "role": "submitter",
                                     "queues": ["team-a"]})
    created = r.json()
    assert set(created) >= {"name", "token"} and created["token"].startswith("fyt_")
    listed = (await harness.api.get("/api/v1/auth/tokens")).json()
    assert created["token"] not in str(listed)
    bot = next(t for t in listed if t["name"] == "ci-bot")
    assert (bot["role"], bot["queues"], bot["state"]) == ("submitter", ["team-a"], "Active")
    engine = sa.create_engine(harness.hub.store.url)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_hash FROM api_tokens WHERE name='ci-bot'"))
        digest = stored.scalar_one()
    engine.dispose()
    assert digest.startswith("scrypt$") and created["token"].split("_", 2)[2] not in digest


def test_hash_verifies_only_the_same_secret() -> None:
    stored = hash_token("s3cret")
    assert verify_token("s3cret", stored)
    assert not verify_token("s3cret!", stored)
    assert not verify_token("s3cret", "md5$00$00")
    assert hash_token("s3cret") != stored        # salted


@pytest.mark.parametrize(("body", "reason"), [
    ({"name": "x", "role": "submitter"}, "needs at least one queue"),
    ({"name": "x", "role": "viewer", "queues": ["a"]}, "queues scope submitter tokens only"),
    ({"name": "Bad Name", "role": "viewer"}, "must be 1-63 lowercase"),
    ({"name": "x", "role": "root"}, "role"),
    ({"name": "x", "role": "viewer", "expires_in_seconds": 5}, "expires_in_seconds"),
])
async def test_bad_token_requests_are_refused(harness: HubHarness, body: dict[str, Any],
                                              reason: str) -> None:
    r = await harness.api.post("/api/v1/auth/tokens", json=body)
    assert r.status_code == 400
    assert reason in r.json()["error"]["message"]


async def test_revoked_token_stops_at_once_and_its_name_can_be_reused(
        harness: HubHarness) -> None:
    bot = await token(harness, "bot", "viewer")
    assert (await bot.get("/api/v1/clusters")).status_code == 200
    assert (await harness.api.delete("/api/v1/auth/tokens/bot")).json()["state"] == "Revoked"
    r = await bot.get("/api/v1/clusters")
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]
    assert (await harness.api.delete("/api/v1/auth/tokens/bot")).status_code == 404
    again = await token(harness, "bot", "viewer")
    assert (await again.get("/api/v1/clusters")).status_code == 200


async def test_expired_token_is_refused(harness: HubHarness) -> None:
    bot = await token(harness, "short", "viewer", expires_in_seconds=60)
    assert (await bot.get("/api/v1/clusters")).status_code == 200
    later = datetime.now(UTC) + timedelta(seconds=61)
    import hub.auth.tokens as tokens_module
    real = tokens_module.datetime

    class Later(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return later

    tokens_module.datetime = Later   # type: ignore[misc]
    try:
        r = await bot.get("/api/v1/clusters")
    finally:
        tokens_module.datetime = real   # type: ignore[misc]
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]


async def test_a_verified_token_is_trusted_while_the_store_is_down_for_a_bounded_time(
        harness: HubHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault 8 (PostgreSQL down): the hub keeps serving its view to callers it knows."""
    import hub.auth.tokens as tokens_module
    bot = await token(harness, "known", "viewer")
    stranger = await token(harness, "stranger", "viewer")
    assert (await bot.get("/api/v1/clusters")).status_code == 200
    harness.hub.auth.tokens._verified.clear()            # the stranger was never used here
    assert (await bot.get("/api/v1/clusters")).status_code == 200

    def down(*args: object) -> None:
        raise Transient("store unavailable (get api token): connection refused")
    monkeypatch.setattr(harness.hub.store, "api_token", down)
    monkeypatch.setattr(tokens_module, "RECHECK_SECONDS", 0.0)   # every request re-reads
    assert (await bot.get("/api/v1/clusters")).status_code == 200
    r = await stranger.get("/api/v1/clusters")
    assert r.status_code == 503 and "store unavailable" in r.json()["error"]["message"]
    monkeypatch.setattr(tokens_module, "STALE_SECONDS", 0.0)     # trusted long enough
    assert (await bot.get("/api/v1/clusters")).status_code == 503


async def test_last_use_is_recorded(harness: HubHarness) -> None:
    bot = await token(harness, "used", "viewer")
    listed = (await harness.api.get("/api/v1/auth/tokens")).json()
    assert next(t for t in listed if t["name"] == "used")["last_used_at"] is None
    await bot.get("/api/v1/clusters")
    listed = (await harness.api.get("/api/v1/auth/tokens")).json()
    assert next(t for t in listed if t["name"] == "used")["last_used_at"] is not None


@pytest.mark.parametrize("header", ["", "Bearer", "Basic abc", "Bearer fyt_nope",
                                    "Bearer fyt_abc_def", "Bearer " + "x" * 500])
async def test_missing_or_bad_bearer_is_401_in_the_envelope(harness: HubHarness,
                                                            header: str) -> None:
    r = await raw(harness, Authorization=header).get("/api/v1/tasks")
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "Unauthenticated"


async def test_submitter_is_scoped_to_its_queues_and_own_tasks(harness: HubHarness) -> None:
    for queue in ("team-a", "team-b"):
        await harness.api.post("/api/v1/queues", json={"name": queue})
    alice = await token(harness, "alice", "submitter", queues=["team-a"])
    bob = await token(harness, "bob", "submitter", queues=["team-a", "team-b"])
    assert (await alice.post("/api/v1/tasks", json={"name": "a1", "queue": "team-a"})
            ).status_code == 201
    r = await alice.post("/api/v1/tasks", json={"name": "a2", "queue": "team-b"})
    assert r.status_code == 403 and "team-b" in r.json()["error"]["message"]
    assert (await bob.post("/api/v1/tasks", json={"name": "b1", "queue": "team-b"})
            ).status_code == 201
    assert (await harness.api.post("/api/v1/tasks", json={"name": "ops", "queue": "default"})
            ).status_code == 201
    assert [t["name"] for t in (await alice.get("/api/v1/tasks")).json()] == ["a1"]
    assert [t["name"] for t in (await bob.get("/api/v1/tasks")).json()] == ["a1", "b1"]
    assert (await bob.get("/api/v1/tasks/a1")).json()["owner"] == "alice"   # read-only
    assert (await alice.get("/api/v1/tasks/b1")).status_code == 403
    r = await bob.post("/api/v1/tasks/a1/cancel")
    assert r.status_code == 403 and "only its own" in r.json()["error"]["message"]
    assert (await alice.post("/api/v1/tasks/a1/cancel")).json()["state"] == "Cancelled"
    audit = (await harness.api.get("/api/v1/audit", params={"action": "task.cancel"})).json()
    assert [(a["actor"], a["role"], a["result"][:7]) for a in audit] == [
        ("alice", "submitter", "ok"), ("bob", "submitter", "refused")]


async def test_refusals_are_audited_with_actor_source_request_id_and_reason(
        harness: HubHarness) -> None:
    viewer = await token(harness, "watcher", "viewer")
    r = await viewer.post("/api/v1/clusters/east/cordon", headers={"X-Request-Id": "req-42"})
    assert r.status_code == 403 and r.headers["x-request-id"] == "req-42"
    r = await raw(harness, **{"Content-Type": "application/json"}).delete(
        "/api/v1/clusters/east")
    assert r.status_code == 401
    rows = harness.hub.store.audit_log(limit=2)
    assert [(a["actor"], a["role"], a["action"], a["target"]) for a in rows] == [
        ("anonymous", "", "cluster.remove", "east"),
        ("watcher", "viewer", "cluster.cordon", "east")]
    assert rows[1]["request_id"] == "req-42" and rows[1]["source"] == "127.0.0.1"
    assert rows[1]["result"] == ("refused: token watcher (role viewer) may not cluster.cordon")


async def test_audit_filters(harness: HubHarness) -> None:
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    await harness.api.post("/api/v1/tasks", json={"name": "t1"})
    r = await harness.api.get("/api/v1/audit", params={"action": "cluster."})
    assert [a["action"] for a in r.json()] == ["cluster.join"]
    r = await harness.api.get("/api/v1/audit", params={"target": "t1", "actor": "admin"})
    assert [a["action"] for a in r.json()] == ["task.submit"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (await harness.api.get("/api/v1/audit", params={"since": future})).json() == []


async def test_no_route_changes_or_deletes_audit_rows(harness: HubHarness) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        r = await harness.api.request(method, "/api/v1/audit")
        assert r.status_code == 405
        assert r.json()["error"]["code"] == "MethodNotAllowed"


async def test_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    from dataclasses import replace
    h = await start_harness(tmp_path / "hub", FAST)
    h.hub.auth.limiter.rate, h.hub.auth.limiter.burst = 0.5, 3
    try:
        statuses = [(await h.api.get("/api/v1/clusters")) for _ in range(4)]
        assert [r.status_code for r in statuses] == [200, 200, 200, 429]
        assert int(statuses[-1].headers["retry-after"]) >= 1
        assert statuses[-1].json()["error"]["code"] == "TooManyRequests"
    finally:
        await stop_harness(h)
    assert replace   # keeps the import honest for readers


@pytest.mark.parametrize(("host", "ok"), [("127.0.0.1", True), ("::1", True),
                                          ("localhost", True), ("0.0.0.0", False),
                                          ("10.0.0.5", False)])
def test_auth_none_only_on_loopback(host: str, ok: bool) -> None:
    if ok:
        check_auth_mode("none", host)
    else:
        with pytest.raises(InvalidInput, match="only on a loopback"):
            check_auth_mode("none", host)
    check_auth_mode("token", host)


async def test_open_mode_is_admin_for_all_and_says_so_in_readyz(tmp_path: Path) -> None:
    from hub.core import Hub
    hub = Hub(HubConfig(home=tmp_path / "hub", agent_tls=False, auth="none", timings=FAST))
    await hub.start()
    try:
        assert not (tmp_path / "hub" / "admin.token").exists()
        api = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(hub)),
                                base_url="http://hub")
        who = (await api.get("/api/v1/auth/whoami")).json()
        assert (who["role"], who["auth"]) == ("admin", "none")
        health = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_health_app(hub)),
                                   base_url="http://hub")
        ready = (await health.get("/readyz")).json()
        assert ready["auth"] == "none" and "AUTHENTICATION IS OFF" in ready["warning"]
    finally:
        await hub.stop()
