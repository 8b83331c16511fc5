"""Dividing a task's replicas across clusters (Karmada's divided replica scheduling).

Pure arithmetic, no fleet access: ``hub.division.placer`` measures how many replicas each
feasible cluster can take now with the real fit code (``capacity``, best-scored cluster
first) and asks ``divide`` how to split them; it then places one part (one workload) per
cluster. The rule, per ``spread``:

- ``aggregated`` (the default): the fewest clusters - the cluster that takes the most
  first (ties: the better-scored one), filled to its capacity, then the next;
- ``weighted`` with static ``weights`` (cluster -> weight): replicas in proportion to the
  weights by largest remainder (ties: the better-scored cluster), never more than a
  cluster's capacity - what a full cluster cannot take goes to the other weighted clusters
  by their weights; a cluster without a weight (or weight 0) gets nothing;
- ``weighted`` and ``dynamic``: the weights are the capacities themselves (Karmada's
  ``dynamicWeight: AvailableReplicas``).

The answer never gives a cluster more than its capacity, never more than ``replicas`` in
all, and places as many as it can (``min(replicas, what the clusters allow)``); whether that
is enough (``min_replicas``) is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Mapping

from fuyao.spread import AGGREGATED

Parts = dict[str, int]   # cluster -> replicas (> 0), in the order the clusters were given


def divide(replicas: int, capacity: Mapping[str, int], *, spread: str = AGGREGATED,
           weights: Mapping[str, int] | None = None, dynamic: bool = False) -> Parts:
    """Split ``replicas`` over the clusters of ``capacity`` (cluster -> replicas it can take
    now, best-scored first)."""
    room = {c: max(0, n) for c, n in capacity.items()}
    if replicas <= 0 or not any(room.values()):
        return {}
    if spread == AGGREGATED:
        return _aggregated(replicas, room)
    shares = dict(room) if dynamic else {c: (weights or {}).get(c, 0) for c in room}
    return _weighted(replicas, room, shares)


def _aggregated(replicas: int, room: Mapping[str, int]) -> Parts:
    rank = {c: i for i, c in enumerate(room)}
    out: Parts = {}
    left = replicas
    for cluster in sorted(room, key=lambda c: (-room[c], rank[c])):
        if left == 0 or room[cluster] == 0:
            break
        take = min(left, room[cluster])
        out[cluster] = take
        left -= take
    return {c: out[c] for c in room if c in out}


def _weighted(replicas: int, room: Mapping[str, int], shares: Mapping[str, int]) -> Parts:
    given = dict.fromkeys(room, 0)
    active = [c for c in room if shares.get(c, 0) > 0 and room[c] > 0]
    left = replicas
    while left > 0 and active:
        split = _largest_remainder(left, [(c, shares[c]) for c in active])
        for cluster in active:
            take = min(split[cluster], room[cluster] - given[cluster])
            given[cluster] += take
            left -= take
        active = [c for c in active if given[c] < room[c]]
    return {c: n for c, n in given.items() if n > 0}


def _largest_remainder(total: int, weighted: list[tuple[str, int]]) -> dict[str, int]:
    """``total`` split by weight: floors, then one more each by largest remainder (ties: the
    earlier cluster)."""
    whole = sum(w for _, w in weighted)
    out = {c: total * w // whole for c, w in weighted}
    rest = total - sum(out.values())
    order = sorted(range(len(weighted)),
                   key=lambda i: (-(total * weighted[i][1] % whole), i))
    for i in order[:rest]:
        out[weighted[i][0]] += 1
    return out


def describe(parts: Mapping[str, int]) -> str:
    """``3 on gpu-east, 1 on gpu-west``."""
    return ", ".join(f"{n} on {c}" for c, n in parts.items()) or "none"
