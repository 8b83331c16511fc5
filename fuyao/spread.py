"""Replica division across clusters: the spec fields' names, limits and checks.

``TaskSpec`` (``fuyao.spec``) calls ``check_division`` from its validator, so the CLI, the
SDK and the hub refuse the same bad input with the same message. The division rule itself
(how many replicas each cluster gets) is the hub's: ``hub.placement.division``.

Fields (all optional, for ``gang: false`` tasks with ``replicas > 1``)::

    spread: aggregated | weighted      # aggregated (default): fewest clusters
    spread_weights: {gpu-east: 2, gpu-west: 1}   # weighted, static weights per cluster
    spread_dynamic: true               # weighted by how many replicas each cluster takes now
    min_replicas: 2                    # runs once this many are placed and running
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Spread = Literal["aggregated", "weighted"]
AGGREGATED: Spread = "aggregated"
WEIGHTED: Spread = "weighted"
MAX_SPREAD_WEIGHTS = 64
MAX_SPREAD_WEIGHT = 10_000


def check_division(*, gang: bool, replicas: int, spread: str, weights: Mapping[str, int],
                   dynamic: bool, min_replicas: int | None) -> None:
    """ValueError with a clear message when the division fields do not fit together."""
    divided = spread != AGGREGATED or weights or dynamic or min_replicas is not None
    if gang and divided:
        raise ValueError("gang: true places all replicas in one cluster; spread, "
                         "spread_weights, spread_dynamic and min_replicas are for gang: false")
    if min_replicas is not None and min_replicas > replicas:
        raise ValueError(f"min_replicas {min_replicas} is more than replicas {replicas}")
    if spread == AGGREGATED and (weights or dynamic):
        raise ValueError("spread_weights and spread_dynamic need spread: weighted")
    if spread == WEIGHTED:
        if bool(weights) == dynamic:
            raise ValueError("spread: weighted needs either spread_weights (static, e.g. "
                             "{gpu-east: 2, gpu-west: 1}) or spread_dynamic: true, not both")
        if weights and sum(weights.values()) <= 0:
            raise ValueError("spread_weights must give some cluster a weight above 0")


def check_weight(cluster: str, weight: int) -> None:
    """ValueError unless ``weight`` is an integer in 0..MAX_SPREAD_WEIGHT."""
    if isinstance(weight, bool) or not isinstance(weight, int) \
            or not 0 <= weight <= MAX_SPREAD_WEIGHT:
        raise ValueError(f"spread weight of {cluster} must be an integer in "
                         f"0..{MAX_SPREAD_WEIGHT}, got {weight!r}")
