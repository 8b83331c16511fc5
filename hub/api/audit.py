"""REST: ``/api/v1/audit`` — the newest audited mutations, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from fuyao.spec import AuditEntry
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["audit"])


@router.get("/audit", response_model=list[AuditEntry])
async def audit_log(hub: HubDep,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[AuditEntry]:
    """Who did what, when, and with what result (joins, cordons, removals, submits,
    cancels, agent registrations), newest first."""
    rows = await hub.writer.read(hub.store.audit_log, limit)
    return [AuditEntry.model_validate(row) for row in rows]
