"""StaticWeight score: Karmada's ``staticWeightList`` with weights proportional to capacity.

Karmada divides a workload's replicas among clusters by static weights and, since v1.8,
gives the remainder to clusters at random in proportion to their weights ("divide replicas
by static weight evenly"); a one-replica task is all remainder, so it goes to a feasible
cluster drawn with probability weight / sum of weights. The weight here is the cluster's
capacity in what the task asks for: its milli-GPUs for a GPU task, its cpu for a CPU-only
one (the weights an operator would write for a capacity-proportional split). The raw score
is the weight; ``normalize`` draws the winner (100, the others 0) from a seeded generator.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

from hub.fleet import WHOLE, ClusterInfo
from hub.placement.framework import MAX_SCORE, MIN_SCORE, CycleState, Handle, PlacementRequest

NAME = "StaticWeight"


class StaticWeight:
    """Picks a feasible cluster at random, weighted by its capacity."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle, rng: random.Random | None = None) -> None:
        del handle
        self._rng = rng or random.Random()

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Raw score: the cluster's capacity (milli-GPUs for GPU tasks, else cpu millicores)."""
        if req.requests.gpu_milli:
            return float(sum(t.devices for t in cluster.totals().values()) * WHOLE)
        return float(cluster.cpu_total)

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        """One cluster drawn in proportion to its weight scores 100 (uniform if all are 0)."""
        if not scores:
            return
        weights = scores if sum(scores) > 0 else [1.0] * len(scores)
        pick = self._rng.choices(range(len(scores)), weights=weights)[0]
        scores[:] = [MAX_SCORE if i == pick else MIN_SCORE for i in range(len(scores))]
