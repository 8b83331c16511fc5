"""A copy of the fleet view to plan on: same clusters, same effective free resources.

Every planning question (``hub.planning.fit``, ``hub.planning.failover``) is answered by the
real scheduler and fit code running against a ``FleetView`` built here, never against the
live one: what a question reserves or removes on the copy never touches placement.

The copy has each cluster's settings (labels, weight, headroom, state, cordon) and each
node as the hub sees it now - the agent's report minus the hub's own reservations - so a
reservation on the live view is capacity already spent on the copy.
"""

from __future__ import annotations

from dataclasses import replace

from fuyao.inventory import NodeInfo, ResourceAmounts
from hub.fleet import FleetView, NodeState


def copy_fleet(fleet: FleetView) -> FleetView:
    """A new fleet view with the clusters and effective node states of ``fleet``."""
    out = FleetView()
    for cluster in fleet.clusters():
        out.upsert_cluster(cluster.name, labels=cluster.labels, weight=cluster.weight,
                           headroom=cluster.headroom, state=cluster.state,
                           cordoned=cluster.cordoned)
        out.replace_nodes(cluster.name, [effective_node(n) for n in cluster.nodes()])
    return out


def effective_node(node: NodeState) -> NodeInfo:
    """The node's report with hub holds taken off its free amounts (a fresh, hold-free node)."""
    info = node.info
    dev_free = node.dev_free
    devices = tuple(replace(d, free_milli=dev_free.get(d.id, d.free_milli))
                    for d in info.devices)
    free = ResourceAmounts(cpu_milli=node.cpu, memory_mib=node.mem, pods=node.pods)
    return replace(info, free=free, devices=devices)
