"""REST for high availability: ``GET /api/v1/hub/status`` and what a standby answers.

``install(app, hub)`` (one line in ``hub.api.app``) mounts the status route and the
standby guard. On a standby (``hub.ha.serving`` false: not leading, or leading but still
rebuilding its view after a takeover, when reads wait for the rebuild) the guard answers
every write, and
reads of the in-memory fleet view (``/capacity``, ``explain``), with 503 ``Unavailable``:
the message and ``details`` name the leader's REST and agent addresses and its epoch, and the
``Fuyao-Leader`` header carries the leader's REST address, so a client can retry there.
Other reads reload the standby's read cache from the store when it is stale and are served
by the ordinary routers. The leader passes everything through.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from fuyao.spec import error_body
from hub.api.deps import HubDep
from hub.core import Hub

router = APIRouter(prefix="/api/v1/hub", tags=["hub"])
LEADER_HEADER = "Fuyao-Leader"
_ANY_REPLICA = ("/api/v1/hub/", "/api/v1/events")     # served by every replica
_LEADER_ONLY_READS = ("/api/v1/capacity",)            # the fleet view lives on the leader
_READS = ("GET", "HEAD", "OPTIONS")


@router.get("/status")
async def status(hub: HubDep) -> dict[str, Any]:
    """The replicas on this store, which one leads, and its fencing epoch."""
    return await hub.ha.status()


def _not_leader(hub: Hub, what: str) -> JSONResponse:
    refusal = hub.ha.refusal(what)
    leader = refusal.leader
    details = None if leader is None else {
        "leader": leader.api_address, "leader_agent_address": leader.agent_address,
        "epoch": leader.epoch}
    headers = {LEADER_HEADER: leader.api_address} if leader and leader.api_address else {}
    return JSONResponse(error_body(refusal.code, refusal.message, details), status_code=503,
                        headers=headers)


def install(app: FastAPI, hub: Hub) -> None:
    """Mount the status route and the standby guard on the REST app."""
    app.include_router(router)
    app.add_middleware(StandbyGuard, hub=hub)


class StandbyGuard:
    """The standby guard of the module docstring, as plain ASGI middleware: on the serving
    leader every request passes straight through. (Starlette's ``@app.middleware("http")``
    form it had ran every request through a task group and memory streams: ~0.5 ms of the
    event loop's CPU a REST submit of 10 tasks, ``docs/benchmarks.md``, e2e section,
    "Twenty-second pass".)"""

    def __init__(self, app: ASGIApp, hub: Hub) -> None:
        self.app = app
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub = self.hub
        path = scope.get("path", "")
        if (scope["type"] != "http" or hub.ha.serving or not path.startswith("/api/")
                or path.startswith(_ANY_REPLICA)):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in _READS:
            await _not_leader(hub, "take writes")(scope, receive, send)
            return
        if hub.ha.leading:
            # Taking over: the view is being rebuilt under the read lock; a read waits for
            # it and is then served as the leader's (never by reloading the standby cache).
            async with hub.ha.reads.lock:
                pass
        elif path.startswith(_LEADER_ONLY_READS) or path.endswith("/explain"):
            await _not_leader(hub, "hold the fleet view")(scope, receive, send)
            return
        else:
            await hub.ha.reads.refresh()
        await self.app(scope, receive, send)
