"""The task-feature placement plugins, each on its own: name, input, exact wanted answer;
and a score weight set per task (as a ComputeProfile does) changing the chosen cluster."""

from __future__ import annotations

import pytest

from fuyao.errors import InvalidInput
from fuyao.selector import parse_selector
from fuyao.spec import TaskSpec
from hub.activetask import placement_request
from hub.placement import SUCCESS, Code, CycleState, Handle, PlacementRequest, Status
from hub.placement.plugins.cluster_affinity import ClusterAffinity
from hub.placement.plugins.least_overqualified import LeastOverqualified
from hub.placement.plugins.pack import Pack
from hub.placement.profile import DEFAULT_PROFILE
from hub.placement.variants import Schedulers

from .builders import fleet_of, node

LABELS = {"east": {"fuyao.io/region": "cn-east", "fuyao.io/cost-tier": "premium"},
          "west": {"fuyao.io/region": "cn-west", "fuyao.io/cost-tier": "spot"}}


def labelled_fleet(**nodes: list) -> object:   # type: ignore[type-arg]
    fleet = fleet_of(nodes)
    for name, labels in LABELS.items():
        if fleet.cluster(name) is not None:
            fleet.upsert_cluster(name, labels=labels, weight=1, headroom=0.0,
                                 state=fleet.cluster(name).state)  # type: ignore[union-attr]
    return fleet


def spec_request(**fields: object) -> PlacementRequest:
    return placement_request("t", TaskSpec.model_validate({"name": "t", **fields}), 0)


AFFINITY_FILTER = [
    ("no-selector", {}, "east", SUCCESS),
    ("match", {"cluster_selector": "fuyao.io/region = cn-east"}, "east", SUCCESS),
    ("in-set", {"cluster_selector": "fuyao.io/region in (cn-east, cn-west)"}, "west", SUCCESS),
    ("no-match", {"cluster_selector": "fuyao.io/region = cn-east"}, "west",
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "cluster labels do not match fuyao.io/region=cn-east", "ClusterAffinity")),
    ("missing-label", {"cluster_selector": "fuyao.io/site"}, "east",
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cluster labels do not match fuyao.io/site",
            "ClusterAffinity")),
]


@pytest.mark.parametrize(("fields", "cluster", "want"), [c[1:] for c in AFFINITY_FILTER],
                         ids=[c[0] for c in AFFINITY_FILTER])
def test_cluster_affinity_filter(fields: dict[str, object], cluster: str, want: Status) -> None:
    fleet = labelled_fleet(east=[node("e1")], west=[node("w1")])
    plugin = ClusterAffinity(Handle(fleet))  # type: ignore[arg-type]
    info = fleet.cluster(cluster)  # type: ignore[attr-defined]
    assert plugin.filter(CycleState(), spec_request(**fields), info) == want


AFFINITY_SCORE = [
    ("none", [], "west", 100.0),
    ("matched", [{"selector": "fuyao.io/cost-tier = spot", "weight": 3}], "west", 100.0),
    ("unmatched", [{"selector": "fuyao.io/cost-tier = spot", "weight": 3}], "east", 0.0),
    ("partial", [{"selector": "fuyao.io/cost-tier = spot", "weight": 3},
                 {"selector": "fuyao.io/region = cn-east", "weight": 1}], "east", 25.0),
]


@pytest.mark.parametrize(("prefs", "cluster", "want"), [c[1:] for c in AFFINITY_SCORE],
                         ids=[c[0] for c in AFFINITY_SCORE])
def test_cluster_preference_score(prefs: list[dict[str, object]], cluster: str,
                                  want: float) -> None:
    fleet = labelled_fleet(east=[node("e1")], west=[node("w1")])
    plugin = ClusterAffinity(Handle(fleet))  # type: ignore[arg-type]
    req = spec_request(cluster_preference=prefs)
    assert plugin.score(CycleState(), req, fleet.cluster(cluster)) == want  # type: ignore[attr-defined]


LEAST = [
    ("v100-beats-h100", {"v": [node("v1", "V100", 8)], "h": [node("h1", "H100", 8)]},
     {"gpu": 1}, {"v": 100.0, "h": 0.0}),
    ("three-ranks", {"t": [node("t1", "T4", 4)], "v": [node("v1", "V100", 8)],
                     "h": [node("h1", "H100", 8)]},
     {"gpu": 1}, {"t": 100.0, "v": 75.0, "h": 0.0}),
    ("same-rank", {"a": [node("a1", "A100", 8)], "b": [node("b1", "A100", 8)]},
     {"gpu": 1}, {"a": 100.0, "b": 100.0}),
    ("cpu-task", {"v": [node("v1", "V100", 8)], "h": [node("h1", "H100", 8)]},
     {"cpu": 1}, {"v": 100.0, "h": 100.0}),
]


@pytest.mark.parametrize(("clusters", "fields", "want"), [c[1:] for c in LEAST],
                         ids=[c[0] for c in LEAST])
def test_least_overqualified(clusters: dict[str, list], fields: dict[str, object],  # type: ignore[type-arg]
                             want: dict[str, float]) -> None:
    fleet = fleet_of(clusters)
    plugin = LeastOverqualified(Handle(fleet))
    req, ctx = spec_request(**fields), CycleState()
    names = sorted(clusters)
    scores = [plugin.score(ctx, req, fleet.cluster(n)) for n in names]  # type: ignore[arg-type]
    plugin.normalize(ctx, req, names, scores)
    assert dict(zip(names, scores, strict=True)) == want


def test_with_v100s_free_a_v100_capable_task_does_not_take_an_h100() -> None:
    fleet = fleet_of({"a-h100": [node("h1", "H100", 8)], "b-v100": [node("v1", "V100", 8)]})
    schedulers = Schedulers(fleet, DEFAULT_PROFILE)
    req = spec_request(gpu=1, gpu_model=">=V100")
    assert schedulers.base.schedule(req).cluster == "b-v100"
    off = schedulers.for_weights({"LeastOverqualified": 0})
    assert off.schedule(req).cluster == "a-h100"   # configurable: weight 0 switches it off


PACK = [
    ("empty", [node("n1", cpu=10)], 10.0),   # 1 of 10 cpus used after placing
    ("half", [node("n1", cpu=10, free_cpu=5)], 60.0),
]


@pytest.mark.parametrize(("nodes", "want"), [c[1:] for c in PACK], ids=[c[0] for c in PACK])
def test_pack_score(nodes: list, want: float) -> None:  # type: ignore[type-arg]
    fleet = fleet_of({"c1": nodes})
    plugin = Pack(Handle(fleet))
    req = spec_request(cpu=1, memory="1Mi")
    assert plugin.score(CycleState(), req, fleet.cluster("c1")) == pytest.approx(want)  # type: ignore[arg-type]


def test_a_score_weight_in_the_profile_changes_the_chosen_cluster() -> None:
    # busy: 6 of 8 cpus used; idle: nothing used. Spread (the default) picks idle;
    # a task whose profile says {Headroom: 0, Pack: 3} packs onto busy.
    fleet = fleet_of({"busy": [node("b1", cpu=8, free_cpu=2)], "idle": [node("i1", cpu=8)]})
    schedulers = Schedulers(fleet, DEFAULT_PROFILE)
    spread = spec_request(cpu=1, memory="1Mi")
    packed = spec_request(cpu=1, memory="1Mi", score_weights={"Headroom": 0, "Pack": 3})
    assert schedulers.for_weights({}).schedule(spread).cluster == "idle"
    chosen = schedulers.for_weights({"Headroom": 0, "Pack": 3}).schedule(packed)
    assert chosen.cluster == "busy"
    assert schedulers.for_weights({"Pack": 3, "Headroom": 0}) is schedulers.for_weights(
        {"Headroom": 0, "Pack": 3})


def test_an_unknown_score_plugin_is_refused() -> None:
    schedulers = Schedulers(fleet_of({}), DEFAULT_PROFILE)
    with pytest.raises(InvalidInput, match="'Magic' is not a score plugin"):
        schedulers.check({"Magic": 1})
    with pytest.raises(InvalidInput, match="'NodeFit' is not a score plugin"):
        schedulers.check({"NodeFit": 1})


def test_selectors_on_cluster_labels_parse_like_node_selectors() -> None:
    assert str(parse_selector("fuyao.io/region in (cn-east)")) == "fuyao.io/region=cn-east"
