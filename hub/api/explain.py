"""REST: ``POST /api/v1/tasks:dry-run`` (where would it go?) and
``GET /api/v1/tasks/{name}/explain`` (why does it wait?). Both only read."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.insight import DryRunView, ExplainView
from fuyao.spec import TaskSpec
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["tasks"])


@router.post("/tasks:dry-run", response_model=DryRunView)
async def dry_run(spec: TaskSpec, hub: HubDep) -> DryRunView:
    """Judge a task against the fleet as it is now: cluster, nodes, scores, or the fit
    error with its histogram and nearest fit. Stores and reserves nothing."""
    return hub.explainer.dry_run(hub.resolve(spec))


@router.get("/tasks/{name}/explain", response_model=ExplainView)
async def explain(name: str, hub: HubDep) -> ExplainView:
    """Why a task waits: reason histogram, queue state, scores, dependencies, nearest fit."""
    return await hub.explainer.explain(name)
