"""Every REST route x every role (and no token): the exact status each one gets.

The routes come from the hub's own OpenAPI document; a route without a case here, or
without a rule in ``hub.auth.policy.POLICY``, fails the test, and so does a policy rule for
a route that does not exist. Each case prepares fresh objects per role (a cluster to
remove, a task to cancel), so what one role does never changes what the next one sees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from fuyao.identity import Role
from hub.api import create_app
from hub.auth.policy import POLICY, Access, allowed
from hub.ui import router as ui_router
from tests.hub.conftest import HubHarness, auth_headers

ROLES: list[Role | None] = [Role.ADMIN, Role.OPERATOR, Role.SUBMITTER, Role.VIEWER, None]
QUEUE = "team-a"


@dataclass
class World:
    """The harness plus one client per role."""

    h: HubHarness
    clients: dict[Role | None, httpx.AsyncClient]

    async def submit(self, role: Role | None, name: str, queue: str = QUEUE) -> None:
        """Submit as ``role`` when it may submit (so the task is its own), else as admin."""
        by = role if role in (Role.ADMIN, Role.SUBMITTER) else Role.ADMIN
        r = await self.clients[by].post("/api/v1/tasks", json={"name": name, "queue": queue})
        assert r.status_code == 201, r.text

    async def admin(self, method: str, url: str, **kw: Any) -> httpx.Response:
        r = await self.h.api.request(method, url, **kw)
        assert r.is_success, r.text
        return r


Prepare = Callable[[World, str], Awaitable[tuple[str, Any]]]   # -> (url, json body)


def fixed(url: str, body: Any = None) -> Prepare:
    async def prepare(_: World, __: str) -> tuple[str, Any]:
        return url, body
    return prepare


async def _removable_cluster(w: World, tag: str) -> tuple[str, Any]:
    await w.admin("POST", "/api/v1/clusters", json={"name": f"rm-{tag}"})
    return f"/api/v1/clusters/rm-{tag}", None


async def _revocable_token(w: World, tag: str) -> tuple[str, Any]:
    await w.admin("POST", "/api/v1/auth/tokens", json={"name": f"rv-{tag}", "role": "viewer"})
    return f"/api/v1/auth/tokens/rv-{tag}", None


async def _join_token(w: World, tag: str) -> tuple[str, Any]:
    r = await w.admin("POST", "/api/v1/clusters/east/tokens", json={})
    token_id = hashlib.sha256(r.json()["token"].encode()).hexdigest()[:12]
    return f"/api/v1/clusters/east/tokens/{token_id}", None


async def _queue(w: World, tag: str) -> tuple[str, Any]:
    await w.admin("POST", "/api/v1/queues", json={"name": f"q-{tag}"})
    return f"/api/v1/queues/q-{tag}", None


async def _queue_patch(w: World, tag: str) -> tuple[str, Any]:
    url, _ = await _queue(w, tag)
    return url, {"weight": 2}


async def _profile(w: World, tag: str) -> tuple[str, Any]:
    await w.admin("PUT", f"/api/v1/profiles/p-{tag}", json={"name": f"p-{tag}"})
    return f"/api/v1/profiles/p-{tag}", None


async def _profile_put(_: World, tag: str) -> tuple[str, Any]:
    return f"/api/v1/profiles/new-{tag}", {"name": f"new-{tag}"}


def _own_task(prefix: str, *, ended: bool) -> Prepare:
    async def prepare(w: World, tag: str) -> tuple[str, Any]:
        role = None if tag == "none" else Role(tag)
        await w.submit(role, f"{prefix}-{tag}")
        if ended:
            await w.admin("POST", f"/api/v1/tasks/{prefix}-{tag}/cancel")
        suffix = "" if ended else "/cancel"
        return f"/api/v1/tasks/{prefix}-{tag}{suffix}", None
    return prepare


def _new(what: str, path: str | None = None, **extra: Any) -> Prepare:
    async def prepare(_: World, tag: str) -> tuple[str, Any]:
        name = f"{what}-{tag}"
        if what == "batch":
            return "/api/v1/tasks:batch", {"tasks": [{"name": name, "queue": QUEUE}]}
        return f"/api/v1/{path or what}", {"name": name, **extra}
    return prepare


# (method, path template) -> (how to call it, status when the role may)
CASES: dict[tuple[str, str], tuple[Prepare, int]] = {
    ("GET", "/healthz"): (fixed("/healthz"), 200),
    ("GET", "/api/v1/auth/whoami"): (fixed("/api/v1/auth/whoami"), 200),
    ("GET", "/api/v1/auth/tokens"): (fixed("/api/v1/auth/tokens"), 200),
    ("POST", "/api/v1/auth/tokens"): (_new("tok", path="auth/tokens", role="viewer"), 201),
    ("DELETE", "/api/v1/auth/tokens/{name}"): (_revocable_token, 200),
    ("GET", "/api/v1/clusters"): (fixed("/api/v1/clusters"), 200),
    ("POST", "/api/v1/clusters"): (_new("clusters"), 201),
    ("GET", "/api/v1/clusters/{name}"): (fixed("/api/v1/clusters/east"), 200),
    ("PUT", "/api/v1/clusters/{name}/taints"):
        (fixed("/api/v1/clusters/east/taints", {"taints": []}), 200),
    ("GET", "/api/v1/catalog"): (fixed("/api/v1/catalog"), 200),
    ("GET", "/api/v1/clusters/{name}/nodes"): (fixed("/api/v1/clusters/east/nodes"), 200),
    # the harness has no --secrets-key-file: a caller who may push-join gets its 400
    ("POST", "/api/v1/clusters/push"):
        (fixed("/api/v1/clusters/push", {"name": "pushed", "kubeconfig": "x"}), 400),
    ("DELETE", "/api/v1/clusters/{name}"): (_removable_cluster, 200),
    ("POST", "/api/v1/clusters/{name}/cordon"): (fixed("/api/v1/clusters/east/cordon"), 200),
    ("POST", "/api/v1/clusters/{name}/uncordon"):
        (fixed("/api/v1/clusters/east/uncordon"), 200),
    ("GET", "/api/v1/clusters/{name}/tokens"): (fixed("/api/v1/clusters/east/tokens"), 200),
    ("POST", "/api/v1/clusters/{name}/tokens"):
        (fixed("/api/v1/clusters/east/tokens", {"ttl_seconds": 600}), 201),
    ("DELETE", "/api/v1/clusters/{name}/tokens/{token_id}"): (_join_token, 200),
    ("GET", "/api/v1/tasks"): (fixed("/api/v1/tasks"), 200),
    ("POST", "/api/v1/tasks"): (_new("tasks", queue=QUEUE), 201),
    ("POST", "/api/v1/tasks:batch"): (_new("batch"), 201),
    ("GET", "/api/v1/tasks/{name}"): (fixed("/api/v1/tasks/shared"), 200),
    ("DELETE", "/api/v1/tasks/{name}"): (_own_task("del", ended=True), 200),
    ("POST", "/api/v1/tasks/{name}/cancel"): (_own_task("can", ended=False), 200),
    ("POST", "/api/v1/tasks:dry-run"): (fixed("/api/v1/tasks:dry-run",
                                              {"name": "dry", "queue": QUEUE}), 200),
    ("GET", "/api/v1/tasks/{name}/explain"): (fixed("/api/v1/tasks/shared/explain"), 200),
    ("GET", "/api/v1/queues"): (fixed("/api/v1/queues"), 200),
    ("POST", "/api/v1/queues"): (_new("queues"), 201),
    ("GET", "/api/v1/queues/{name}"): (fixed("/api/v1/queues/default"), 200),
    ("PATCH", "/api/v1/queues/{name}"): (_queue_patch, 200),
    ("DELETE", "/api/v1/queues/{name}"): (_queue, 200),
    ("GET", "/api/v1/profiles"): (fixed("/api/v1/profiles"), 200),
    ("GET", "/api/v1/profiles/{name}"): (_profile, 200),
    ("PUT", "/api/v1/profiles/{name}"): (_profile_put, 200),
    ("DELETE", "/api/v1/profiles/{name}"): (_profile, 200),
    ("GET", "/api/v1/capacity"): (fixed("/api/v1/capacity"), 200),
    ("GET", "/api/v1/capacity/history"): (fixed("/api/v1/capacity/history"), 200),
    ("GET", "/api/v1/capacity/n-1"): (fixed("/api/v1/capacity/n-1"), 200),
    ("GET", "/api/v1/capacity/report"): (fixed("/api/v1/capacity/report"), 200),
    ("POST", "/api/v1/capacity/fit"): (fixed("/api/v1/capacity/fit", {"gpu": 1}), 200),
    ("POST", "/api/v1/capacity/report"): (fixed("/api/v1/capacity/report", {}), 200),
    ("GET", "/api/v1/audit"): (fixed("/api/v1/audit"), 200),
    ("GET", "/api/v1/hub/status"): (fixed("/api/v1/hub/status"), 200),
    ("GET", "/api/v1/events"): (fixed("/api/v1/events?timeout=0"), 200),
}


def openapi_routes(h: HubHarness) -> set[tuple[str, str]]:
    """Every (METHOD, path) the REST app documents."""
    doc = create_app(h.hub).openapi()
    return {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}


def expected(role: Role | None, route: tuple[str, str], ok: int) -> int:
    rule = POLICY[route]
    if rule.access == Access.PUBLIC:
        return ok
    if role is None:
        return 401
    return ok if allowed(role, rule) else 403


async def make_world(h: HubHarness) -> World:
    admin_token = (h.hub.config.home / "admin.token").read_text().strip()
    clients: dict[Role | None, httpx.AsyncClient] = {Role.ADMIN: h.api}
    transport = httpx.ASGITransport(app=create_app(h.hub))
    for role in (Role.OPERATOR, Role.SUBMITTER, Role.VIEWER):
        body: dict[str, Any] = {"name": f"the-{role.value}", "role": role.value}
        if role == Role.SUBMITTER:
            body["queues"] = [QUEUE]
        r = await h.api.post("/api/v1/auth/tokens", json=body)
        assert r.status_code == 201, r.text
        clients[role] = httpx.AsyncClient(transport=transport, base_url="http://hub",
                                          headers=auth_headers(r.json()["token"]))
    clients[None] = httpx.AsyncClient(transport=transport, base_url="http://hub",
                                      headers={"Content-Type": "application/json"})
    assert admin_token
    w = World(h, clients)
    await w.admin("POST", "/api/v1/clusters", json={"name": "east"})
    await w.admin("POST", "/api/v1/queues", json={"name": QUEUE})
    await w.submit(Role.ADMIN, "shared")
    return w


async def test_every_route_has_a_policy_rule_and_a_matrix_case(harness: HubHarness) -> None:
    routes = openapi_routes(harness)
    hidden = {(method, route.path) for route in ui_router.routes    # not in the schema
              if isinstance(route, APIRoute) for method in route.methods}
    served = routes | hidden
    assert served - set(POLICY) == set(), "routes without an access policy rule"
    assert set(POLICY) - served == set(), "policy rules for routes that do not exist"
    assert routes - set(CASES) == set(), "routes without a case in this matrix"


@pytest.mark.parametrize("route", sorted(CASES), ids=lambda r: f"{r[0]} {r[1]}")
async def test_role_matrix(harness: HubHarness, route: tuple[str, str]) -> None:
    w = await make_world(harness)
    prepare, ok = CASES[route]
    got: dict[str, int] = {}
    want: dict[str, int] = {}
    for role in ROLES:
        tag = role.value if role else "none"
        url, body = await prepare(w, tag)
        r = await w.clients[role].request(route[0], url, json=body)
        got[tag] = r.status_code
        want[tag] = expected(role, route, ok)
        if r.status_code >= 400:
            assert r.json()["error"]["code"], r.text      # the one error envelope
    assert got == want
