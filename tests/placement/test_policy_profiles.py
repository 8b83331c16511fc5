"""The named profiles' cluster choices on fleets small enough to check by hand."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from fuyao.fragmentation import Shape, ShapeMix
from hub.placement import Handle, Profile, Scheduler, with_plugins
from hub.placement.plugins.dynamic_weight import available
from hub.placement.plugins.fragmentation import Fragmentation
from hub.placement.plugins.random_cluster import RandomCluster
from hub.placement.plugins.static_weight import StaticWeight
from hub.placement.profiles import PROFILES
from tests.placement.builders import fleet_of, node, place

HALF = ShapeMix([Shape(1000, 1024, 500)])


def scheduler(fleet_clusters: dict[str, list[object]], name: str, seed: int = 1) -> Scheduler:
    fleet = fleet_of(fleet_clusters)  # type: ignore[arg-type]
    rng = random.Random(seed)
    registry = with_plugins({
        RandomCluster.name: lambda h: RandomCluster(h, rng),
        StaticWeight.name: lambda h: StaticWeight(h, rng),
        Fragmentation.name: lambda h: Fragmentation(h, HALF),
    })
    return Scheduler(fleet, PROFILES[name], registry=registry)


def test_every_named_profile_reads_back_from_its_config() -> None:
    assert set(PROFILES) == {"default", "fgd", "random", "static-weight", "dynamic-weight"}
    for profile in PROFILES.values():
        assert Profile.from_config(profile.to_config()) == profile


def test_dynamic_weight_picks_the_cluster_that_can_take_most_copies() -> None:
    # a: one node with 2 free cards; b: two nodes with 1 and 2 free cards -> 3 copies
    s = scheduler({"a": [node("a1", "T4", 2)],
                   "b": [node("b1", "T4", 1), node("b2", "T4", 2)]}, "dynamic-weight")
    result = s.schedule(place(gpu_milli=1000))
    assert result.cluster == "b"
    assert result.scores is not None


@pytest.mark.parametrize(("kwargs", "want"), [
    ({"gpu_milli": 1000}, 3),      # three free cards
    ({"gpu_milli": 250}, 12),      # four quarters per card
    ({"gpu_milli": 2000}, 1),      # one pair of cards
    ({"cpu": 30}, 2),              # 64 cores / 30
    ({"memory_gib": 200}, 2),      # 512 GiB / 200
], ids=["cards", "quarters", "pairs", "cpu", "memory"])
def test_available_counts_copies_like_the_estimator(kwargs: dict[str, int], want: int) -> None:
    fleet = fleet_of({"a": [node("a1", "T4", 3)]})
    state = fleet.cluster("a").node("a1")  # type: ignore[union-attr]
    assert state is not None
    assert available(state, place(**kwargs).requests) == want  # type: ignore[arg-type]


def test_static_weight_draws_clusters_in_proportion_to_capacity() -> None:
    s = scheduler({"a": [node("a1", "T4", 1)], "b": [node("b1", "T4", 3)]}, "static-weight")
    picks = Counter(s.schedule(place(f"t{i}", gpu_milli=100)).cluster for i in range(400))
    assert set(picks) == {"a", "b"}
    assert 2.0 < picks["b"] / picks["a"] < 4.5      # weights 1:3 (seeded: not flaky)


def test_static_weight_never_picks_an_infeasible_cluster() -> None:
    s = scheduler({"a": [node("a1", "T4", 1)], "b": [node("b1", "T4", 8, free_milli=[0] * 8)]},
                  "static-weight")
    assert {s.schedule(place(f"t{i}", gpu_milli=500)).cluster for i in range(50)} == {"a"}


def test_random_profile_spreads_over_the_feasible_clusters_reproducibly() -> None:
    fleets = {c: [node(f"{c}1", "T4", 1)] for c in "abc"}

    def picks(seed: int) -> list[str | None]:
        s = scheduler(fleets, "random", seed=seed)
        return [s.schedule(place(f"t{i}", gpu_milli=100)).cluster for i in range(30)]

    assert picks(5) == picks(5) != picks(6)
    assert set(picks(5)) == {"a", "b", "c"}


def test_fragmentation_profile_picks_the_cluster_and_node_that_strand_nothing() -> None:
    # a's only card has 600 free: a half there strands 100; on b2's 700 it strands 200. b1's
    # card is whole: a half there leaves 500, still usable. Best-fit would take a1 (fullest).
    fleets = {"a": [node("a1", "T4", 1, free_milli=[600])],
              "b": [node("b1", "T4", 1), node("b2", "T4", 1, free_milli=[700])]}
    result = scheduler(fleets, "fgd").schedule(place(gpu_milli=500))
    assert (result.cluster, result.nodes, result.model) == ("b", ("b1",), "T4")


def test_fragmentation_filter_never_rejects_and_leaves_cpu_work_to_node_fit() -> None:
    fleets = {"a": [node("a0")], "b": [node("b1", "T4", 1)]}
    result = scheduler(fleets, "fgd").schedule(place(cpu=2))
    assert result.cluster == "a"       # AcceleratorFit keeps CPU work off GPU nodes


def test_fragmentation_without_a_mix_uses_the_default_shapes() -> None:
    plugin = Fragmentation(Handle(fleet_of({})))
    assert plugin.mix.shapes
