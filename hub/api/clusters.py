"""REST: ``/api/v1/clusters`` — join, list, describe, cordon, uncordon, remove."""

from __future__ import annotations

from fastapi import APIRouter, Request

from fuyao.spec import ClusterView, JoinRequest, JoinResponse
from hub.api.deps import HubDep
from hub.api.push import forget, mode_of

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.post("", status_code=201, response_model=JoinResponse)
async def join_cluster(req: JoinRequest, hub: HubDep) -> JoinResponse:
    """Create a cluster and return its one-time join token and agent command."""
    return await hub.join_cluster(req)


@router.get("", response_model=list[ClusterView])
async def list_clusters(hub: HubDep, request: Request) -> list[ClusterView]:
    """Every member cluster, by name."""
    push = mode_of(request)
    return [v.model_copy(update={"mode": "push"}) if v.name in push else v
            for v in hub.cluster_views()]


@router.get("/{name}", response_model=ClusterView)
async def get_cluster(name: str, hub: HubDep, request: Request) -> ClusterView:
    """One member cluster."""
    view = hub.cluster_view(name)
    return view.model_copy(update={"mode": "push"}) if name in mode_of(request) else view


@router.post("/{name}/cordon", response_model=ClusterView)
async def cordon(name: str, hub: HubDep) -> ClusterView:
    """Block new placements on the cluster (what runs there keeps running)."""
    return await hub.set_cordoned(name, True)


@router.post("/{name}/uncordon", response_model=ClusterView)
async def uncordon(name: str, hub: HubDep) -> ClusterView:
    """Allow placements on the cluster again."""
    return await hub.set_cordoned(name, False)


@router.delete("/{name}")
async def remove_cluster(name: str, hub: HubDep, request: Request) -> dict[str, object]:
    """Remove the cluster; its tasks are re-queued, its agent credential stops working; a
    push member's agent is stopped and its stored credentials deleted."""
    try:
        return await hub.remove_cluster(name)
    finally:
        await forget(request, name)
