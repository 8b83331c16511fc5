"""AcceleratorFit score: keep CPU-only work off accelerator nodes while other room exists.

GPU fleets taint their GPU nodes (``nvidia.com/gpu:NoSchedule``) and score to keep
accelerators free; this is that preference at cluster level. For a CPU-only task (no GPU
request) a cluster scores ``100 x`` the share of its replicas that fit on nodes without
accelerators: 100 when they all do, 0 when the task would only fit on GPU (or NPU) nodes, in
between when a multi-replica task would spill onto them. GPU tasks - shares and whole cards -
get 100 on every cluster: neutral, the ranking is left to the other plugins.

Cost: NodeFit's search already tries accelerator-free label groups first, so when its fit
(reused from the ``CycleState``) lies on such nodes the score is read off it; only when it
used a GPU node does ``hub.fleet.find_plain_fit`` search the accelerator-free groups' cpu
buckets. Like every score, it depends only on the request and the cluster, so the scheduler
caches it with the filter verdict.
"""

from __future__ import annotations

from typing import ClassVar, Final

from hub.fleet import ClusterInfo, Fit, find_plain_fit
from hub.placement.framework import MAX_SCORE, CycleState, Depends, Handle, PlacementRequest
from hub.placement.plugins.node_fit import fit_for

NAME: Final = "AcceleratorFit"
NEUTRAL: Final = MAX_SCORE
"""What every cluster scores for a task that requests GPUs."""


class AcceleratorFit:
    """Scores clusters where a CPU-only task fits without spending accelerator nodes."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.NODES
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """100 x the share of replicas that fit on nodes without accelerators (GPU tasks 100)."""
        r = req.requests
        if r.gpu_milli:
            return NEUTRAL
        found = fit_for(ctx, req, cluster)
        if isinstance(found, Fit) and all(_plain(cluster, n) for n in found.nodes):
            return MAX_SCORE
        plain = find_plain_fit(cluster, req.selector, req.selector_key, r)
        if isinstance(plain, Fit):
            return MAX_SCORE
        return MAX_SCORE * plain.placed / max(1, r.replicas)


def _plain(cluster: ClusterInfo, node: str) -> bool:
    """True when the node has no accelerator devices."""
    state = cluster.node(node)
    return state is not None and not state.classes
