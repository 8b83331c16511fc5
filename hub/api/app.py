"""FastAPI applications: the REST API and the health/metrics endpoint.

``create_app(hub)`` mounts the routers of ``hub.api.*``, runs ``hub.auth.guard.guard`` (the
access policy) for every route, wraps the app in ``hub.api.guardrails.Guardrails`` (request
ids, body limit, JSON content type, same origin), and turns every ``FuyaoError``, every
request-validation failure and the framework's own 404/405 into the one error shape
``{"error": {"code", "message", "details"}}`` with the error's HTTP status (validation
failures are 400 InvalidInput; 429 carries ``Retry-After``). ``create_health_app(hub)``
serves ``/healthz``, ``/readyz`` (which says when authentication is off) and ``/metrics``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from fuyao import __version__
from fuyao.errors import FuyaoError, RateLimited
from fuyao.spec import error_body
from hub.api import (
    audit,
    auth,
    capacity,
    catalog,
    clusters,
    events,
    explain,
    ha,
    jointokens,
    nodes,
    planning,
    profiles,
    queues,
    taints,
    tasks,
)
from hub.api import push as push_api
from hub.api.guardrails import Guardrails
from hub.auth.guard import guard
from hub.auth.service import OPEN_WARNING
from hub.core import Hub
from hub.ui import router as ui_router

_HTTP_CODES = {404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge",
               415: "UnsupportedMediaType"}
# Answers any route may give, declared once for the OpenAPI document.
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "invalid input"},
    401: {"description": "no valid bearer token"},
    403: {"description": "the token's role may not do this, or a cross-site request"},
    404: {"description": "not found"},
    409: {"description": "conflicts with what exists"},
    413: {"description": "request body or batch over its limit"},
    415: {"description": "a mutation without Content-Type: application/json"},
    429: {"description": "rate limit: retry after Retry-After seconds"},
    503: {"description": "store unavailable: retry"},
}


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    details = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            message = "unknown field"
        details.append({"field": loc, "message": message})
    return details


def create_app(hub: Hub) -> FastAPI:
    """The REST API application for ``hub``."""
    app = FastAPI(
        title="Fuyao federation hub",
        version=__version__,
        description="Many Kubernetes clusters of mixed accelerators as one pool. Every "
                    "route but /healthz needs 'Authorization: Bearer <token>'.",
        dependencies=[Depends(guard)],
        responses=COMMON_RESPONSES,
    )
    app.state.hub = hub
    app.include_router(clusters.router)
    app.include_router(jointokens.router)
    app.include_router(nodes.router)
    app.include_router(push_api.router)
    app.include_router(explain.router)
    app.include_router(profiles.router)
    app.include_router(taints.router)
    app.include_router(catalog.router)
    app.include_router(tasks.router)
    app.include_router(capacity.router)
    app.include_router(audit.router)
    app.include_router(queues.router)
    app.include_router(auth.router)
    app.include_router(planning.router)
    app.include_router(ui_router)
    ha.install(app, hub)
    app.include_router(events.router)
    app.add_middleware(Guardrails, max_body_bytes=hub.config.max_body_bytes)   # outermost

    @app.exception_handler(FuyaoError)
    async def _fuyao_error(_: Request, exc: FuyaoError) -> JSONResponse:
        headers = ({"Retry-After": str(int(exc.retry_after))}
                   if isinstance(exc, RateLimited) else None)
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.http_status,
                            headers=headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "Error")
        message = (f"no route {request.method} {request.url.path}" if exc.status_code == 404
                   else f"{request.method} is not allowed on {request.url.path}"
                   if exc.status_code == 405 else str(exc.detail))
        return JSONResponse(error_body(code, message), status_code=exc.status_code,
                            headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        summary = "; ".join(
            f"{d['field']}: {d['message']}" if d["field"] else d["message"] for d in details
        )
        return JSONResponse(error_body("InvalidInput", f"invalid request: {summary}", details),
                            status_code=400)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    return app


def create_health_app(hub: Hub) -> FastAPI:
    """Liveness, readiness and metrics for probes and Prometheus (port 8851)."""
    app = FastAPI(title="Fuyao hub health", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        # A standby is ready: it serves reads and answers writes with the leader's address.
        role = "leader" if hub.ha.leading else "standby"
        ready = bool(hub.started) or (role == "standby" and hub.ha.lost is None)
        body: dict[str, Any] = {"ready": ready, "role": role, **hub.events.readiness(),
                                "auth": hub.auth.mode}
        if not hub.auth.enabled:
            body["warning"] = OPEN_WARNING
        if body["redis"] == "down":     # degraded, not failed: placement goes on
            body["degraded"] = True
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(hub.metrics.render(), media_type="text/plain; version=0.0.4")

    return app
