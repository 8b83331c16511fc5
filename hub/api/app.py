"""FastAPI applications: the REST API and the health/metrics endpoint.

``create_app(hub)`` mounts the routers of ``hub.api.clusters``, ``hub.api.tasks`` and
``hub.api.capacity`` and turns every ``FuyaoError`` and every request-validation failure
into the one error shape ``{"error": {"code", "message", "details"}}`` with the error's
HTTP status (validation failures are 400 InvalidInput). ``create_health_app(hub)`` serves
``/healthz``, ``/readyz`` and Prometheus ``/metrics``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from fuyao import __version__
from fuyao.errors import FuyaoError
from fuyao.spec import error_body
from hub.api import (
    audit,
    capacity,
    clusters,
    events,
    explain,
    ha,
    nodes,
    planning,
    profiles,
    queues,
    tasks,
)
from hub.api import push as push_api
from hub.core import Hub
from hub.ui import router as ui_router


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
        description="Many Kubernetes clusters of mixed accelerators as one pool.",
    )
    app.state.hub = hub
    app.include_router(clusters.router)
    app.include_router(nodes.router)
    app.include_router(push_api.router)
    app.include_router(explain.router)
    app.include_router(profiles.router)
    app.include_router(tasks.router)
    app.include_router(capacity.router)
    app.include_router(audit.router)
    app.include_router(queues.router)
    app.include_router(planning.router)
    app.include_router(ui_router)
    ha.install(app, hub)
    app.include_router(events.router)

    @app.exception_handler(FuyaoError)
    async def _fuyao_error(_: Request, exc: FuyaoError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.http_status)

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
        body: dict[str, Any] = {"ready": ready, "role": role, **hub.events.readiness()}
        if body["redis"] == "down":     # degraded, not failed: placement goes on
            body["degraded"] = True
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(hub.metrics.render(), media_type="text/plain; version=0.0.4")

    return app
