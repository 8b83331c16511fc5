"""REST: ``/api/v1/clusters/{name}/nodes`` — a cluster's nodes as the hub's fleet view holds
them (the agent's last report: labels, allocatable, free, per-device free shares).

Read by ``fuyaoctl simulate --from-hub`` (``hub.planning.simulate.live``) to replay what-ifs
on the live fleet; any client may read it. Hub reservations not yet bound are not
subtracted: these are the member's own figures.
"""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.inventory import NodeInfo
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.get("/{name}/nodes", response_model=list[NodeInfo])
async def cluster_nodes(name: str, hub: HubDep) -> list[NodeInfo]:
    """Every node of one cluster, sorted by name (404 if the cluster does not exist)."""
    hub.cluster_view(name)   # NotFound for an unknown cluster
    cluster = hub.fleet.cluster(name)
    return [] if cluster is None else [state.info for state in cluster.nodes()]
