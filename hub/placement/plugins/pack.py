"""Pack score: fill the busiest cluster that fits first (bin-packing across clusters).

The mirror of the Headroom score, which spreads work to the emptier cluster: 100 minus 100 x
the fraction of the tightest resource left after placing (``headroom.room_after``). A
placement profile (or a task's ``score_weights``, e.g. from a ComputeProfile) chooses
between them: ``{Headroom: 0, Pack: 3}`` packs, the default profile spreads. Like every
score it depends only on the request and the cluster, so the scheduler caches it.
"""

from __future__ import annotations

from typing import ClassVar

from hub.fleet import ClusterInfo
from hub.placement.framework import MAX_SCORE, MIN_SCORE, CycleState, Handle, PlacementRequest
from hub.placement.plugins.headroom import room_after

NAME = "Pack"


class Pack:
    """Scores a cluster higher the less room it has left after the task."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """100 x the fraction of the tightest resource in use after placing."""
        used = 1.0 - room_after(ctx, req, cluster)
        return max(MIN_SCORE, min(MAX_SCORE, MAX_SCORE * used))
