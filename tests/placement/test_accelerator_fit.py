"""AcceleratorFit: CPU-only work scores clusters where it fits off accelerator nodes higher."""

from __future__ import annotations

import pytest

from fuyao.inventory import NodeInfo
from hub.fleet import FleetView
from hub.placement import DEFAULT_PROFILE, CycleState, Handle, Profile, Scheduler
from hub.placement.plugins.accelerator_fit import NEUTRAL, AcceleratorFit

from .builders import Reqs, fleet_of, node, place

# A CPU node mislabelled like the A100 boxes: it shares their label group, so the index cannot
# tell it apart by labels (and, bigger, it sits in a higher cpu bucket than they do).
A100_LABELS = {"fuyao.io/gpu-model": "A100", "fuyao.io/gpu-memory": "80Gi",
               "fuyao.io/gpu-count": "8"}

# name: (the cluster's nodes, selector, requests, wanted score)
SCORES: dict[str, tuple[list[NodeInfo], str, Reqs, float]] = {
    "fits on a CPU node": ([node("g1", "A100", 8), node("c1")], "", {}, 100.0),
    "only GPU nodes": ([node("g1", "A100", 8), node("g2", "T4", 4)], "", {}, 0.0),
    "CPU node has no cpu left": (
        [node("g1", "A100", 8), node("c1", free_cpu=0)], "", {}, 0.0),
    "CPU node has no memory left": (
        [node("g1", "A100", 8), node("c1", free_memory_gib=0)], "", {}, 0.0),
    "CPU node cordoned": (
        [node("g1", "A100", 8), node("c1", unschedulable=True)], "", {}, 0.0),
    "selector matches only GPU nodes": (
        [node("g1", "A100", 8), node("c1")], "fuyao.io/gpu-model = A100", {}, 0.0),
    "selector matches the CPU node": (
        [node("g1", "A100", 8), node("c1", labels={"kubernetes.io/arch": "arm64"})],
        "kubernetes.io/arch = arm64", {}, 100.0),
    "half the replicas spill onto a GPU node": (
        [node("g1", "A100", 8), node("c1", free_cpu=2)], "", {"replicas": 4}, 50.0),
    "all replicas fit on CPU nodes": (
        [node("g1", "A100", 8), node("c1", free_cpu=2), node("c2", free_cpu=2)], "",
        {"replicas": 4}, 100.0),
    "CPU node in a GPU label group": (
        [node("g1", "A100", 8), node("c1", cpu=256, labels=A100_LABELS)], "", {}, 100.0),
    "whole-card task is neutral": (
        [node("g1", "A100", 8), node("c1")], "", {"gpu_milli": 1000}, NEUTRAL),
    "shared-card task is neutral": (
        [node("g1", "A100", 8)], "", {"gpu_milli": 250}, NEUTRAL),
}


@pytest.mark.parametrize(("nodes", "selector", "reqs", "wanted"), SCORES.values(), ids=SCORES)
def test_score(nodes: list[NodeInfo], selector: str, reqs: Reqs, wanted: float) -> None:
    fleet = fleet_of({"c": nodes})
    info = fleet.cluster("c")
    assert info is not None
    plugin = AcceleratorFit(Handle(fleet))
    assert plugin.score(CycleState(), place(selector=selector, **reqs), info) == wanted


def test_hub_reservations_count_as_used() -> None:
    fleet = fleet_of({"c": [node("g1", "A100", 8), node("c1", cpu=4)]})
    info = fleet.cluster("c")
    assert info is not None
    plugin = AcceleratorFit(Handle(fleet))
    assert plugin.score(CycleState(), place(cpu=1), info) == 100.0
    fleet.reserve("c", "held", place(cpu=4).requests, ("c1",), model=None)
    assert plugin.score(CycleState(), place(cpu=1), info) == 0.0


def gpu_only_vs_edge() -> FleetView:
    """A favoured GPU-only cluster and a lightly weighted CPU-only one."""
    return fleet_of({"gpu-only": [node("g1", "A100", 8)], "edge": [node("e1")]},
                    weights={"gpu-only": 5, "edge": 1})


# name: (fleet, requests, wanted cluster, wanted nodes)
DECISIONS: dict[str, tuple[FleetView, Reqs, str, tuple[str, ...]]] = {
    "CPU work leaves the favoured GPU-only cluster": (
        gpu_only_vs_edge(), {}, "edge", ("e1",)),
    "CPU work stays in a GPU cluster that has CPU nodes": (
        fleet_of({"gpu-east": [node("a1", "A100", 8), node("s1")], "edge": [node("e1")]},
                 weights={"gpu-east": 3, "edge": 1}),
        {}, "gpu-east", ("s1",)),
    "GPU work still follows the weights": (
        fleet_of({"mixed": [node("g1", "A100", 8), node("c1")], "gpu": [node("g2", "A100", 8)]},
                 weights={"mixed": 1, "gpu": 5}),
        {"gpu_milli": 1000}, "gpu", ("g2",)),
    "with no CPU room anywhere a GPU node still takes it": (
        fleet_of({"gpu-only": [node("g1", "A100", 8)], "edge": [node("e1", free_cpu=0)]}),
        {}, "gpu-only", ("g1",)),
}


@pytest.mark.parametrize(("fleet", "reqs", "cluster", "nodes"), DECISIONS.values(),
                         ids=DECISIONS)
def test_default_profile_decision(
    fleet: FleetView, reqs: Reqs, cluster: str, nodes: tuple[str, ...],
) -> None:
    assert "AcceleratorFit" in [s.name for s in DEFAULT_PROFILE.scores]
    result = Scheduler(fleet).schedule(place(**reqs))
    assert (result.cluster, result.nodes) == (cluster, nodes)


def test_weight_zero_gives_the_decision_back_to_cluster_weight() -> None:
    config = DEFAULT_PROFILE.to_config()
    config["scores"] = [{**s, "weight": 0} if s["name"] == "AcceleratorFit" else s
                        for s in config["scores"]]
    result = Scheduler(gpu_only_vs_edge(), Profile.from_config(config)).schedule(place())
    assert result.cluster == "gpu-only"


def test_cached_scores_follow_reservations() -> None:
    """The CPU node's room goes to the first task; the second sees the cluster's new score."""
    fleet = fleet_of({"mixed": [node("g1", "A100", 8), node("c1", cpu=1)],
                      "gpu": [node("g2", "A100", 8)]}, weights={"mixed": 1, "gpu": 2})
    cached, uncached = Scheduler(fleet), Scheduler(fleet, cache=False)
    chosen = []
    for task in ("t1", "t2"):
        req = place(task, cpu=1)
        result = cached.schedule(req)
        assert uncached.schedule(req).cluster == result.cluster
        assert cached.reserve(req, result).ok
        chosen.append((result.cluster, result.nodes))
    assert chosen == [("mixed", ("c1",)), ("gpu", ("g2",))]
