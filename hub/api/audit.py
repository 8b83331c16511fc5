"""REST: ``/api/v1/audit`` — the newest audited mutations, newest first, with filters.

Read-only: no route changes or deletes an audit row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from fuyao.spec import AuditEntry
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["audit"])


@router.get("/audit", response_model=list[AuditEntry])
async def audit_log(
    hub: HubDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    since: Annotated[datetime | None, Query(description="only entries at or after")] = None,
    actor: Annotated[str | None, Query(max_length=200)] = None,
    action: Annotated[str | None, Query(max_length=100,
                                        description="an action, or a prefix ending in '.'")]
    = None,
    target: Annotated[str | None, Query(max_length=500)] = None,
) -> list[AuditEntry]:
    """Who did what, when, from where, and with what result (joins, cordons, removals,
    submits, cancels, deletions, token changes, agent registrations, the hub's own
    failovers), newest first."""
    if since is not None and since.tzinfo is None:
        since = since.astimezone()
    rows = await hub.writer.read(hub.store.audit_log, limit, since=since, actor=actor,
                                 action=action, target=target)
    return [AuditEntry.model_validate(row) for row in rows]
