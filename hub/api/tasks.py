"""REST: ``/api/v1/tasks`` — submit (one or a batch), list (paginated), describe, cancel,
delete.

A submitter token sees and submits only tasks of its queues, and cancels or deletes only
its own (``hub.auth.scope``); other roles are not scoped. Lists come in pages of at most
``limit`` tasks; the ``X-Continue`` response header holds the token for the next page
(absent on the last one), passed back as ``continue``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Response

from fuyao.errors import InvalidInput, PermissionDenied
from fuyao.spec import TaskBatch, TaskSpec, TaskState, TaskView
from hub.api.deps import HubDep, IdentityDep
from hub.auth.scope import check_change, check_read, check_submit, readable_queues
from hub.core import Hub

router = APIRouter(prefix="/api/v1", tags=["tasks"])

MAX_PAGE = 1000
CONTINUE_HEADER = "X-Continue"


@contextlib.asynccontextmanager
async def _refusal_audited(hub: Hub, action: str, target: str) -> AsyncIterator[None]:
    """Audit a scope refusal (the operation itself audits its own outcome)."""
    try:
        yield
    except PermissionDenied as exc:
        await hub.audit(action, target, f"refused: {exc.message}")
        raise


@router.post("/tasks", status_code=201, response_model=TaskView)
async def submit_task(spec: TaskSpec, hub: HubDep, identity: IdentityDep) -> TaskView:
    """Store a task as Queued (durably, before answering) and queue it for placement."""
    async with _refusal_audited(hub, "task.submit", spec.name):
        check_submit(identity, [spec])
    return (await hub.submit([spec]))[0]


@router.post("/tasks:batch", status_code=201, response_model=list[TaskView])
async def submit_batch(batch: TaskBatch, hub: HubDep, identity: IdentityDep) -> list[TaskView]:
    """Store several tasks: all of them, or none (e.g. one duplicate name)."""
    async with _refusal_audited(hub, "task.submit", batch.tasks[0].name):
        check_submit(identity, batch.tasks)
    return await hub.submit(batch.tasks)


def _continue_from(token: str | None) -> int:
    if not token:
        return 0
    if not token.isdigit() or len(token) > 19:
        raise InvalidInput(f"continue token {token[:40]!r} is not one this hub gave out")
    return int(token)


@router.get("/tasks", response_model=list[TaskView])
async def list_tasks(
    hub: HubDep, identity: IdentityDep, response: Response,
    state: TaskState | None = None, cluster: Annotated[str | None, Query(max_length=63)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 500,
    continue_: Annotated[str | None, Query(alias="continue", max_length=40)] = None,
) -> list[TaskView]:
    """A page of tasks in submission order, optionally filtered by state and cluster."""
    views, after = await hub.list_tasks(state.value if state else None, cluster,
                                        queues=readable_queues(identity),
                                        after=_continue_from(continue_), limit=limit)
    if after is not None:
        response.headers[CONTINUE_HEADER] = str(after)
    return views


@router.get("/tasks/{name}", response_model=TaskView)
async def describe_task(name: str, hub: HubDep, identity: IdentityDep) -> TaskView:
    """One task with its timeline, per-cluster scores and, when Queued, rejection reasons."""
    view = await hub.describe_task(name)
    check_read(identity, view.queue, name)
    return view


@router.post("/tasks/{name}/cancel", response_model=TaskView)
async def cancel_task(name: str, hub: HubDep, identity: IdentityDep) -> TaskView:
    """Cancel a task that has not ended (409 if it has)."""
    rec = await hub.writer.read(hub.store.get_task, name)
    async with _refusal_audited(hub, "task.cancel", name):
        check_change(identity, rec.owner, rec.queue, name, "cancel")
    return await hub.cancel_task(name)


@router.delete("/tasks/{name}")
async def delete_task(name: str, hub: HubDep, identity: IdentityDep) -> dict[str, str]:
    """Delete a task that has ended (409 if it has not): its name is free again; the audit
    log keeps the deletion."""
    async with hub.audited("task.delete", name):
        rec = await hub.writer.read(hub.store.get_task, name)
        check_change(identity, rec.owner, rec.queue, name, "delete")
        return await hub.retention.delete(name)
