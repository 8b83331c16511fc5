"""REST: ``PUT /api/v1/clusters/{name}/taints`` - replace a cluster's taints
(``fuyaoctl cluster taint``). New placements only: nothing running is moved."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from fuyao.spec import ClusterView
from fuyao.taints import MAX_TAINTS, Taint
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["clusters"])


class TaintList(BaseModel):
    """The cluster's taints after the change (an empty list removes them all)."""

    model_config = ConfigDict(extra="forbid")

    taints: list[Taint] = Field(default_factory=list, max_length=MAX_TAINTS)


@router.put("/clusters/{name}/taints", response_model=ClusterView)
async def set_taints(name: str, body: TaintList, hub: HubDep) -> ClusterView:
    """Replace the taints; a task lands there only if it tolerates every NoSchedule one."""
    shown = ", ".join(str(t) for t in body.taints) or "none"
    async with hub.audited("cluster.taint", name) as notes:
        await hub.clusters.set_taints(name, list(dict.fromkeys(body.taints)))
        notes.append(shown)
    hub.placement.poke()
    return hub.cluster_view(name)
