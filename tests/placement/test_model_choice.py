"""Model choice inside one cluster: ``find_fit(..., least_overqualified=...)``.

With V100s free and a tighter H100 node, a V100-capable task takes a V100 when the search
chooses the least over-qualified model, and the H100 when it chooses the tightest node of
any model (today's packing behaviour); the headroom reserve is respected first, unranked
models come after ranked ones, and a multi-replica task tries models in rank order too.
"""

from __future__ import annotations

import pytest

from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import TaskRequests
from hub.fleet import Fit, Miss, find_fit
from hub.placement import Scheduler
from hub.placement.profile import DEFAULT_PROFILE, Profile
from hub.placement.profiles import FGD_PROFILE

from .builders import fleet_of, node, place, requests

_H100_TIGHT = node("h1", "H100", 8, free_milli=[1000] + [0] * 7)
_V100_FREE = node("v1", "V100", 8)


def search(nodes: list[NodeInfo], selector: str, r: TaskRequests, least: bool,
           headroom: float = 0.0) -> Fit | Miss:
    cluster = fleet_of({"c1": nodes}, headroom=headroom).cluster("c1")
    assert cluster is not None
    sel = parse_selector(selector)
    return find_fit(cluster, sel, str(sel), r, least_overqualified=least)


CASES = [
    # (id, nodes, selector, requests, headroom, least-overqualified, tightest)
    ("v100-task-free-v100s-tight-h100", [_H100_TIGHT, _V100_FREE], "gpu-model>=V100",
     requests(gpu_milli=1000), 0.0, Fit(("v1",), "V100"), Fit(("h1",), "H100")),
    ("share-task", [node("h1", "H100", 1, free_milli=[500]), node("v1", "V100", 2)], "",
     requests(gpu_milli=500), 0.0, Fit(("v1",), "V100"), Fit(("h1",), "H100")),
    ("headroom-first", [node("h1", "H100", 8), node("h2", "H100", 8), _V100_FREE], "",
     requests(gpu_milli=8000), 0.5, Fit(("h1",), "H100"), Fit(("h1",), "H100")),
    ("unranked-after-ranked", [node("g1", "G1", 8, free_milli=[1000] + [0] * 7),
                               node("h1", "H100", 8)], "",
     requests(gpu_milli=1000), 0.0, Fit(("h1",), "H100"), Fit(("g1",), "G1")),
    ("gang-rank-order", [node("h1", "H100", 8), node("h2", "H100", 8),
                         node("v1", "V100", 8), node("v2", "V100", 8),
                         node("v3", "V100", 8)], "",
     requests(gpu_milli=8000, replicas=2), 0.0, Fit(("v1", "v2"), "V100"),
     Fit(("v1", "v2"), "V100")),
    ("gang-lowest-rank-that-fits", [node("h1", "H100", 8), node("h2", "H100", 8),
                                    node("v1", "V100", 8)], "",
     requests(gpu_milli=8000, replicas=2), 0.0, Fit(("h1", "h2"), "H100"),
     Fit(("h1", "h2"), "H100")),
]


@pytest.mark.parametrize(("nodes", "selector", "r", "headroom", "least", "tight"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_model_choice(nodes: list[NodeInfo], selector: str, r: TaskRequests,
                      headroom: float, least: Fit | Miss, tight: Fit | Miss) -> None:
    assert search(nodes, selector, r, True, headroom) == least
    assert search(nodes, selector, r, False, headroom) == tight


@pytest.mark.parametrize(("profile", "wanted"), [
    (DEFAULT_PROFILE, ("v1", "V100")),
    (Profile.from_config({"model_choice": "tightest"}), ("h1", "H100")),
    (FGD_PROFILE, ("h1", "H100")),
], ids=["default-least-overqualified", "configured-tightest", "fgd-packs"])
def test_the_profile_chooses_the_model_inside_a_cluster(
    profile: Profile, wanted: tuple[str, str],
) -> None:
    """With V100s free, a V100-capable task does not take an H100 under the default profile;
    ``model_choice: tightest`` (and the packing trace profiles) take the tighter H100."""
    fleet = fleet_of({"c1": [_H100_TIGHT, _V100_FREE]}, headroom=0.0)
    result = Scheduler(fleet, profile).schedule(place("t1", "gpu-model>=V100", gpu_milli=1000))
    assert (result.cluster, result.nodes[0], result.model) == ("c1", *wanted)


def test_an_unknown_model_choice_is_refused() -> None:
    with pytest.raises(InvalidInput, match="model_choice 'best' must be one of"):
        Profile.from_config({"model_choice": "best"})
