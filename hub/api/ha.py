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

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

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

    @app.middleware("http")
    async def standby_guard(request: Request,
                            call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if hub.ha.serving or not path.startswith("/api/") or path.startswith(_ANY_REPLICA):
            return await call_next(request)
        if request.method not in _READS:
            return _not_leader(hub, "take writes")
        if hub.ha.leading:
            # Taking over: the view is being rebuilt under the read lock; a read waits for
            # it and is then served as the leader's (never by reloading the standby cache).
            async with hub.ha.reads.lock:
                pass
            return await call_next(request)
        if path.startswith(_LEADER_ONLY_READS) or path.endswith("/explain"):
            return _not_leader(hub, "hold the fleet view")
        await hub.ha.reads.refresh()
        return await call_next(request)
