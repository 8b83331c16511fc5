"""ClusterAffinity filter and score: required and preferred cluster labels (Karmada's
ClusterAffinity, Kubernetes' node affinity at cluster level).

``cluster_selector`` (a selector over the cluster's labels: region, site, provider, cost
tier) is required: a cluster whose labels do not match is rejected, for good. Each
``cluster_preference`` entry is a selector with a weight (1..100); a feasible cluster
scores 100 x the weight of the preferences it matches / the weight of them all (100 when
the task states none, so the score is neutral). Both read only the request and the
cluster's labels, so the scheduler caches them (the request's ``cluster_key`` is part of
the cache's shape).
"""

from __future__ import annotations

from typing import ClassVar, Final

from hub.fleet import ClusterInfo
from hub.placement.framework import (
    MAX_SCORE,
    SUCCESS,
    Code,
    CycleState,
    Depends,
    Handle,
    PlacementRequest,
    Status,
)

NAME: Final = "ClusterAffinity"
REASON_NO_MATCH: Final = "cluster labels do not match {selector}"
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict


class ClusterAffinity:
    """Rejects clusters outside ``cluster_selector``; prefers ``cluster_preference`` ones."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.SETTINGS
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """``SUCCESS`` when there is no required selector or the cluster's labels match it."""
        wanted = req.cluster_selector
        if wanted is None or wanted.matches(cluster.labels):
            return _SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      REASON_NO_MATCH.format(selector=wanted), NAME)

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """100 x matched preference weight / total preference weight (100 with none)."""
        preferences = req.cluster_preference
        if not preferences:
            return MAX_SCORE
        total = sum(weight for _, weight in preferences)
        matched = sum(weight for selector, weight in preferences
                      if selector.matches(cluster.labels))
        return MAX_SCORE * matched / total
