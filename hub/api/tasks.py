"""REST: ``/api/v1/tasks`` — submit (one or a batch), list, describe, cancel."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.spec import TaskBatch, TaskSpec, TaskState, TaskView
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["tasks"])


@router.post("/tasks", status_code=201, response_model=TaskView)
async def submit_task(spec: TaskSpec, hub: HubDep) -> TaskView:
    """Store a task as Queued (durably, before answering) and queue it for placement."""
    return (await hub.submit([spec]))[0]


@router.post("/tasks:batch", status_code=201, response_model=list[TaskView])
async def submit_batch(batch: TaskBatch, hub: HubDep) -> list[TaskView]:
    """Store several tasks: all of them, or none (e.g. one duplicate name)."""
    return await hub.submit(batch.tasks)


@router.get("/tasks", response_model=list[TaskView])
async def list_tasks(hub: HubDep, state: TaskState | None = None,
                     cluster: str | None = None) -> list[TaskView]:
    """Tasks in submission order, optionally filtered by state and cluster."""
    return await hub.list_tasks(state.value if state else None, cluster)


@router.get("/tasks/{name}", response_model=TaskView)
async def describe_task(name: str, hub: HubDep) -> TaskView:
    """One task with its timeline, per-cluster scores and, when Queued, rejection reasons."""
    return await hub.describe_task(name)


@router.post("/tasks/{name}/cancel", response_model=TaskView)
async def cancel_task(name: str, hub: HubDep) -> TaskView:
    """Cancel a task that has not ended (409 if it has)."""
    return await hub.cancel_task(name)
