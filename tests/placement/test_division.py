"""Dividing replicas across clusters: the rule (a table) and a property against the real
fit code (parts never exceed what a cluster takes, never sum above the replicas)."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.division.placer import capacity
from hub.placement import Scheduler, memshare
from hub.placement.division import describe, divide

from .builders import fleet_of, node, place

CASES = [
    # name, replicas, capacity (best-scored first), spread, weights, dynamic, wanted parts
    ("aggregated: one cluster takes all", 4, {"a": 2, "b": 6}, "aggregated", None, False,
     {"b": 4}),
    ("aggregated: fewest clusters, most first", 7, {"a": 3, "b": 5, "c": 1}, "aggregated",
     None, False, {"a": 2, "b": 5}),
    ("aggregated: a tie goes to the better-scored", 3, {"a": 2, "b": 2}, "aggregated", None,
     False, {"a": 2, "b": 1}),
    ("aggregated: not enough room places what fits", 9, {"a": 3, "b": 2}, "aggregated",
     None, False, {"a": 3, "b": 2}),
    ("aggregated: a cluster that takes none gets nothing", 2, {"a": 0, "b": 5},
     "aggregated", None, False, {"b": 2}),
    ("weighted static 2:1", 6, {"a": 10, "b": 10}, "weighted", {"a": 2, "b": 1}, False,
     {"a": 4, "b": 2}),
    ("weighted static: remainder by largest fraction", 4, {"a": 10, "b": 10}, "weighted",
     {"a": 2, "b": 1}, False, {"a": 3, "b": 1}),
    ("weighted static: remainder tie to the better-scored", 3, {"a": 9, "b": 9}, "weighted",
     {"a": 1, "b": 1}, False, {"a": 2, "b": 1}),
    ("weighted static: a full cluster's share goes to the others", 6, {"a": 1, "b": 10},
     "weighted", {"a": 2, "b": 1}, False, {"a": 1, "b": 5}),
    ("weighted static: unweighted clusters get nothing", 4, {"a": 5, "b": 5, "c": 5},
     "weighted", {"a": 1, "c": 0}, False, {"a": 4}),
    ("weighted static: weighted clusters full, the rest waits", 8, {"a": 2, "b": 9},
     "weighted", {"a": 1}, False, {"a": 2}),
    ("weighted dynamic: by what each takes now", 6, {"a": 6, "b": 3}, "weighted", None,
     True, {"a": 4, "b": 2}),
    ("weighted dynamic: less room than replicas", 10, {"a": 3, "b": 1}, "weighted", None,
     True, {"a": 3, "b": 1}),
    ("nothing fits anywhere", 3, {"a": 0, "b": 0}, "aggregated", None, False, {}),
    ("no cluster at all", 3, {}, "weighted", None, True, {}),
]


@pytest.mark.parametrize(("replicas", "room", "spread", "weights", "dynamic", "wanted"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_division_rule(replicas: int, room: dict[str, int], spread: str,
                       weights: dict[str, int] | None, dynamic: bool,
                       wanted: dict[str, int]) -> None:
    got = divide(replicas, room, spread=spread, weights=weights, dynamic=dynamic)
    assert got == wanted
    assert list(got) == [c for c in room if c in got]      # in the clusters' order


def test_describe_names_each_part() -> None:
    assert describe({"gpu-east": 3, "gpu-west": 1}) == "3 on gpu-east, 1 on gpu-west"
    assert describe({}) == "none"


def test_capacity_is_the_real_fit() -> None:
    """Cluster a has 3 nodes of 2 A100s: 6 one-GPU replicas, 3 two-GPU ones; b has none."""
    fleet = fleet_of({"a": [node(f"a{i}", "A100", 2) for i in range(3)],
                      "b": [node("b0", "T4", 4)]})
    decide = partial(memshare.schedule, Scheduler(fleet))
    one = place(selector="fuyao.io/gpu-model = A100", gpu_milli=1000)
    two = place(selector="fuyao.io/gpu-model = A100", gpu_milli=2000)
    assert capacity(decide, one, "a", ["a", "b"], 10) == 6
    assert capacity(decide, one, "a", ["a", "b"], 4) == 4
    assert capacity(decide, two, "a", ["a", "b"], 10) == 3
    assert capacity(decide, one, "b", ["a", "b"], 10) == 0


clusters_st = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]),
    st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3),
    min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=clusters_st, replicas=st.integers(min_value=1, max_value=12),
       gpus=st.integers(min_value=1, max_value=2),
       spread=st.sampled_from(["aggregated", "static", "dynamic"]),
       weights=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                               st.integers(min_value=0, max_value=5), min_size=1))
def test_parts_fit_by_the_real_fit_code(layout: dict[str, list[int]], replicas: int,
                                        gpus: int, spread: str,
                                        weights: dict[str, int]) -> None:
    """Parts sum to what is placed, never above ``replicas``, and each part really fits
    its cluster whole (the scheduler places exactly that many there)."""
    fleet = fleet_of({c: [node(f"{c}{i}", "A100", n) for i, n in enumerate(cards)]
                      for c, cards in layout.items()})
    decide = partial(memshare.schedule, Scheduler(fleet))
    base = place(selector="fuyao.io/gpu-model = A100", gpu_milli=1000 * gpus)
    names = list(layout)
    room = {c: capacity(decide, base, c, names, replicas) for c in names}
    parts = divide(replicas, room, spread="aggregated" if spread == "aggregated" else
                   "weighted", weights=weights, dynamic=spread == "dynamic")
    assert sum(parts.values()) <= replicas
    assert all(n > 0 for n in parts.values())
    free = {c: sum(cards) // gpus if gpus == 1 else sum(k // gpus for k in cards)
            for c, cards in layout.items()}
    for cluster, k in parts.items():
        assert k <= room[cluster] <= free[cluster]
        others = frozenset(c for c in names if c != cluster)
        asked = place(selector="fuyao.io/gpu-model = A100", gpu_milli=1000 * gpus,
                      replicas=k, exclude=others)
        assert decide(asked)[1].cluster == cluster
    if spread == "aggregated" or spread == "dynamic":
        assert sum(parts.values()) == min(replicas, sum(room.values()))
    else:
        weighted = [c for c in names if weights.get(c, 0) > 0]
        assert set(parts) <= set(weighted)
        assert sum(parts.values()) == min(replicas, sum(room[c] for c in weighted))
