"""REST: ``/api/v1/queues`` — create, list, describe, update, delete task queues."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.queues import QueueSpec, QueueUpdate, QueueView
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["queues"])


@router.post("/queues", status_code=201, response_model=QueueView)
async def create_queue(spec: QueueSpec, hub: HubDep) -> QueueView:
    """Create a queue (409 if the name is taken; 400 for a bad quota)."""
    async with hub.audited("queue.create", spec.name):
        return await hub.queueing.create(spec)


@router.get("/queues", response_model=list[QueueView])
async def list_queues(hub: HubDep) -> list[QueueView]:
    """Every queue with its use, dominant share and fair share now."""
    return hub.queueing.views()


@router.get("/queues/{name}", response_model=QueueView)
async def describe_queue(name: str, hub: HubDep) -> QueueView:
    """One queue: settings, use against quota, dominant share and fair share now."""
    return hub.queueing.view(name)


@router.patch("/queues/{name}", response_model=QueueView)
async def update_queue(name: str, change: QueueUpdate, hub: HubDep) -> QueueView:
    """Change a queue's level, weight, quotas or borrow limits (a map replaces the old)."""
    async with hub.audited("queue.update", name):
        view = await hub.queueing.update(name, change)
    hub.placement.poke()
    return view


@router.delete("/queues/{name}")
async def delete_queue(name: str, hub: HubDep) -> dict[str, str]:
    """Delete a queue with no task that has not ended (409 names them)."""
    async with hub.audited("queue.delete", name):
        await hub.queueing.delete(name)
    return {"deleted": name}
