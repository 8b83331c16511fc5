"""ClusterWeight score: the operator's static preference, 100 x weight / the largest weight.

``score`` gives the cluster's weight as the raw score and ``normalize`` divides by the
largest weight among the clusters that passed every filter for this decision, so the
favourite feasible cluster always scores 100 (0 for all when every weight is 0).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import ClassVar, Final, cast

from hub.fleet import ClusterInfo
from hub.placement.framework import MAX_SCORE, CycleState, Depends, Handle, PlacementRequest

NAME: Final = "ClusterWeight"


class ClusterWeight:
    """Scores a feasible cluster by its configured weight."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.SETTINGS
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """The raw score: the cluster's weight."""
        return float(cluster.weight)

    def normalize(
        self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
        scores: list[float],
    ) -> None:
        """``100 x weight / max weight among feasible clusters``."""
        summary = self.summarize(set(scores))
        # weights are few distinct values: compute each once, map the column at C speed
        by_weight = {w: self.normalized(summary, w) for w in set(scores)}
        scores[:] = map(by_weight.__getitem__, scores)

    def summarize(self, values: Collection[float]) -> Hashable:
        """The largest weight (0 when there is none)."""
        return max(values, default=0.0)

    def normalized(self, summary: Hashable, raw: float) -> float:
        """``100 x weight / the largest``; 0 for all when the largest is 0."""
        top = cast(float, summary)
        return MAX_SCORE * raw / top if top > 0 else 0.0
