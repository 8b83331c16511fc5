"""LeastOverqualified score: with V100s free, a V100-capable task does not take an H100.

For a GPU task the raw score is the catalog rank of the model NodeFit chose in the cluster
(reused from the ``CycleState``); ``normalize`` gives the lowest-ranked feasible model 100,
the highest 0, linearly between, so the cluster whose hardware exceeds the request least
wins when the weights elsewhere are equal. Every cluster scores 100 for a CPU task, for an
unranked model (the trace's undisclosed ``G1``..``G3``), and when all feasible clusters
offer the same rank. The default profile weighs it 2; a weight of 0 (or leaving it out of
the profile) switches it off.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import ClassVar, Final, cast

from fuyao.catalog import DEFAULT_CATALOG
from hub.fleet import ClusterInfo, Fit
from hub.placement.framework import MAX_SCORE, CycleState, Depends, Handle, PlacementRequest
from hub.placement.plugins.node_fit import fit_for

NAME: Final = "LeastOverqualified"
UNRANKED: Final = -1.0
_CATALOG: Final = DEFAULT_CATALOG   # a C static, not a read of the module's dict
"""The raw score of a cluster whose fit has no ranked model (never outranks a ranked one)."""


class LeastOverqualified:
    """Prefers the feasible cluster whose chosen accelerator ranks lowest."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.FIT
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """The raw score: the catalog rank of the model the fit chose (-1: none/unranked)."""
        if not req.requests.gpu_milli:
            return UNRANKED
        found = fit_for(ctx, req, cluster)
        if not isinstance(found, Fit) or found.model is None:
            return UNRANKED
        rank = _CATALOG.rank(found.model)
        return UNRANKED if rank is None else float(rank)

    def normalize(
        self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
        scores: list[float],
    ) -> None:
        """Lowest rank 100, highest 0; unranked and CPU-only clusters 100."""
        summary = self.summarize(set(scores))
        # catalog ranks are a handful of values: compute each once, map at C speed
        by_rank = {s: self.normalized(summary, s) for s in set(scores)}
        scores[:] = map(by_rank.__getitem__, scores)

    def summarize(self, values: Collection[float]) -> Hashable:
        """(lowest, highest) ranked value, or None when fewer than two ranks differ."""
        ranked = [s for s in values if s >= 0]
        if not ranked or min(ranked) == max(ranked):
            return None
        return (min(ranked), max(ranked))

    def normalized(self, summary: Hashable, raw: float) -> float:
        """``100 x (highest - rank) / (highest - lowest)``; 100 unranked or all alike."""
        if summary is None or raw < 0:
            return MAX_SCORE
        low, high = cast(tuple[float, float], summary)
        return MAX_SCORE * (high - raw) / (high - low)
