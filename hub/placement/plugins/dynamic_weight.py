"""DynamicWeight score: Karmada's ``dynamicWeight: AvailableReplicas``.

Karmada weighs each cluster by how many replicas of the workload it could still run (the
scheduler estimator sums, node by node, how many copies fit) and divides by those weights,
handing the remainder to the clusters with the largest weights first; a one-replica task is
all remainder, so it goes to the feasible cluster that could take the most copies of it. The
raw score is that count over the matching schedulable nodes (cpu, memory, pod slots and the
devices: shares per card, or wholly free cards); ``normalize`` gives 100 x count / the largest
count, so the profile that scores with it alone picks the largest (ties: first name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from fuyao.spec import TaskRequests
from hub.fleet import WHOLE, ClusterInfo, NodeState
from hub.placement.framework import MAX_SCORE, CycleState, Handle, PlacementRequest

NAME = "DynamicWeight"


class DynamicWeight:
    """Scores a feasible cluster by how many more copies of the task it could take."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Raw score: available replicas of this task in the cluster."""
        found = cluster.matching(req.selector, req.selector_key)
        total = 0
        for group in found.groups:
            for node in group.nodes.values():
                if found.per_node and not req.selector.matches(node.labels):
                    continue
                total += available(node, req.requests)
        return float(total)

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        """``100 x available / the most available`` among feasible clusters."""
        top = max(scores, default=0.0)
        scores[:] = [MAX_SCORE * s / top for s in scores] if top > 0 else [0.0] * len(scores)


def available(node: NodeState, r: TaskRequests) -> int:
    """How many replicas of ``r`` fit on this node as it stands (the estimator's count)."""
    if not node.schedulable:
        return 0
    fits = node.pods
    if r.cpu_milli:
        fits = min(fits, node.cpu // r.cpu_milli)
    if r.memory_mib:
        fits = min(fits, node.mem // r.memory_mib)
    if r.gpu_milli and fits:
        cards = 0
        for (_, memory), slot in node.classes.items():
            if memory < r.gpu_memory_mib:
                continue
            cards += (slot.share_capacity(r.gpu_milli) if r.gpu_milli < WHOLE
                      else slot.full // (r.gpu_milli // WHOLE))
        fits = min(fits, cards)
    return max(0, fits)
