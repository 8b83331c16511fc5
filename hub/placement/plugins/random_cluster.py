"""RandomCluster score: a uniformly random feasible cluster (the federation baseline).

The ``random`` profile keeps the default filters and ranks feasible clusters by this alone,
so each task goes to one of the clusters that can take it, chosen uniformly. The raw score
is 0 (so the scheduler may cache it); ``normalize`` draws a fresh 0..100 per cluster and
decision from the plugin's generator, seeded by ``fuyaoctl simulate --seed`` for repeatable
runs and from the OS otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

from hub.fleet import ClusterInfo
from hub.placement.framework import MAX_SCORE, MIN_SCORE, CycleState, Handle, PlacementRequest

NAME = "RandomCluster"


class RandomCluster:
    """Scores every feasible cluster at random."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle, rng: random.Random | None = None) -> None:
        del handle
        self._rng = rng or random.Random()

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Raw score 0: cacheable; ``normalize`` draws the real one per decision."""
        return MIN_SCORE

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        """A fresh random 0..100 per feasible cluster."""
        scores[:] = [self._rng.uniform(MIN_SCORE, MAX_SCORE) for _ in clusters]
