"""REST: ``/api/v1/capacity`` — per cluster and accelerator model: total, allocated,
reserved by headroom, free."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.spec import CapacityRow
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["capacity"])


@router.get("/capacity", response_model=list[CapacityRow])
async def capacity(hub: HubDep, cluster: str | None = None) -> list[CapacityRow]:
    """Capacity rows, sorted by cluster then model."""
    return hub.capacity(cluster)
