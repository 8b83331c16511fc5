"""The scheduler pipeline: filter every cluster, score the feasible, select, explain misses."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import ClassVar

import pytest

from fuyao.spec import ClusterState
from hub.fleet import ClusterInfo, Fit, FleetView
from hub.placement import (
    SUCCESS,
    Code,
    CycleState,
    Handle,
    PlacementRequest,
    Profile,
    Scheduler,
    Status,
    with_plugins,
)
from hub.scorerows import expand, score_records

from .builders import Reqs, fleet_of, node, place


def test_picks_the_only_cluster_that_fits() -> None:
    fleet = fleet_of({
        "a": [node("a1", "V100", 8)],
        "b": [node("b1", "A100", 8, free_milli=[1000] * 2 + [0] * 6)],
        "c": [node("c1", "H100", 8)],
    })
    result = Scheduler(fleet).schedule(place(selector="gpu-model>=A100", gpu_milli=4000))
    assert (result.cluster, result.nodes, result.model, result.error) == (
        "c", ("c1",), "H100", None)
    assert result.reasons == {
        "a": "no node matches fuyao.io/gpu-model>=A100",
        "b": "no node with fuyao.io/gpu-model>=A100 and 4 free GPUs",
    }
    assert [(s.cluster, s.feasible) for s in result.scores] == [
        ("a", False), ("b", False), ("c", True)]


def test_fit_error_is_a_histogram_of_reasons() -> None:
    fleet = fleet_of(
        {
            "a": [node("a1", "A100", 8, free_milli=[0] * 6 + [1000] * 2)],
            "b": [node("b1", "A100", 8, free_milli=[0] * 6 + [1000] * 2)],
            "c": [node("c1", "A100", 8, free_milli=[0] * 6 + [1000] * 2)],
            "d": [node("d1", "A100", 8, free_milli=[0] * 3 + [1000] * 5)],
            "e": [node("e1", "A100", 8, free_milli=[0] * 3 + [1000] * 5)],
        },
        headroom=0.5,
    )
    result = Scheduler(fleet).schedule(place(selector="gpu-model>=A100", gpu_milli=4000))
    assert result.cluster is None
    assert result.error is not None
    assert result.error.message == (
        "0/5 clusters are available: 3 no node with fuyao.io/gpu-model>=A100 and 4 free GPUs, "
        "2 below headroom reserve."
    )
    assert result.error.nearest_fit == "d"


def test_histogram_ties_are_ordered_by_text() -> None:
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1")]},
                     states={"a": ClusterState.NOT_READY})
    fleet.set_cordoned("b", True)
    result = Scheduler(fleet).schedule(place())
    assert result.error is not None
    assert result.error.message == (
        "0/2 clusters are available: 1 cluster cordoned, 1 cluster not ready.")
    assert result.error.nearest_fit is None


def test_empty_fleet() -> None:
    result = Scheduler(FleetView()).schedule(place())
    assert result.error is not None
    assert result.error.message == "0/0 clusters are available: no clusters in the fleet."


def two_clusters() -> FleetView:
    # "big" has the larger weight but is fuller; "roomy" is nearly empty.
    return fleet_of(
        {"big": [node("b1", "A100", 8, free_milli=[0] * 6 + [1000] * 2)],
         "roomy": [node("r1", "A100", 8)]},
        weights={"big": 4, "roomy": 1},
    )


@pytest.mark.parametrize(("weight_weight", "headroom_weight", "wanted"), [
    (10, 1, "big"),
    (1, 10, "roomy"),
], ids=["weight-dominates", "room-dominates"])
def test_changing_a_score_weight_changes_the_ranking(
    weight_weight: float, headroom_weight: float, wanted: str,
) -> None:
    profile = Profile.from_config({"scores": [
        {"name": "ClusterWeight", "weight": weight_weight},
        {"name": "Headroom", "weight": headroom_weight},
    ]})
    result = Scheduler(two_clusters(), profile).schedule(place(gpu_milli=1000))
    assert result.cluster == wanted
    by_name = {s.cluster: s for s in result.scores}
    assert by_name["big"].plugin_scores == {"ClusterWeight": 100.0, "Headroom": 12.5}
    assert by_name["roomy"].plugin_scores == {"ClusterWeight": 25.0, "Headroom": 87.5}
    assert by_name["big"].score == pytest.approx(weight_weight * 100 + headroom_weight * 12.5)


def test_changing_a_cluster_weight_changes_the_ranking() -> None:
    fleet = two_clusters()
    scheduler = Scheduler(fleet)
    assert scheduler.schedule(place(gpu_milli=1000)).cluster == "big"
    fleet.upsert_cluster("roomy", labels={}, weight=8, headroom=0.0, state=ClusterState.READY)
    assert scheduler.schedule(place(gpu_milli=1000)).cluster == "roomy"


def test_ties_go_to_the_first_name() -> None:
    fleet = fleet_of({"b": [node("b1")], "a": [node("a1")], "c": [node("c1")]})
    assert Scheduler(fleet).schedule(place()).cluster == "a"


class Exploding:
    """A filter with a bug on one cluster."""

    name: ClassVar[str] = "Exploding"

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        if cluster.name == "a":
            raise KeyError("boom")
        return SUCCESS

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        if cluster.name == "b":
            raise ZeroDivisionError("bad score")
        return 50.0


def test_a_plugin_exception_is_an_error_status_for_that_cluster_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1")], "c": [node("c1")]})
    profile = Profile.from_config(
        {"filters": ["ClusterReady", "Exploding"], "scores": ["Exploding"]},
        with_plugins({"Exploding": Exploding}),
    )
    scheduler = Scheduler(fleet, profile, registry=with_plugins({"Exploding": Exploding}))
    with caplog.at_level(logging.ERROR):
        result = scheduler.schedule(place())
    assert result.cluster == "c"
    statuses = {v.cluster: v.status for v in result.verdicts}
    assert statuses["a"] == Status(Code.ERROR, "internal error in Exploding: KeyError: 'boom'",
                                   "Exploding")
    assert statuses["b"] == Status(
        Code.ERROR, "internal error in Exploding: ZeroDivisionError: bad score", "Exploding")
    assert "placement plugin Exploding filter failed on cluster a" in caplog.text
    # what the task stores reads back as these verdicts, the ERRORs as rejections
    assert expand(score_records(result)) == [s.model_dump(mode="json") for s in result.scores]
    # Errors are not cached: the next decision asks the plugin again.
    caplog.clear()
    scheduler.schedule(place())
    assert "failed on cluster a" in caplog.text


class BadNormalizer:
    """A score plugin whose ``normalize`` fails: every feasible cluster becomes an ERROR."""

    name: ClassVar[str] = "BadNormalizer"

    def __init__(self, handle: Handle) -> None:
        del handle

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        return 50.0

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        raise ValueError("cannot normalize")


def test_a_failing_normalizer_leaves_no_cluster_and_the_stored_rows_say_why() -> None:
    registry = with_plugins({"BadNormalizer": BadNormalizer})
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1")]},
                     states={"b": ClusterState.UNKNOWN})
    profile = Profile.from_config({"scores": ["Headroom", "BadNormalizer"]}, registry)
    result = Scheduler(fleet, profile, registry=registry).schedule(place())
    assert result.cluster is None
    rows = expand(score_records(result))
    assert rows == [s.model_dump(mode="json") for s in result.scores]
    assert [(r["cluster"], r["feasible"]) for r in rows] == [("a", False), ("b", False)]
    assert "cannot normalize" in rows[0]["reason"]


class Recording:
    """A filter that records the order plugins ran in."""

    name: ClassVar[str] = "Recording"
    calls: ClassVar[list[str]] = []

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        Recording.calls.append(cluster.name)
        return Status(Code.UNSCHEDULABLE, "recorded")


def test_filters_run_in_profile_order_and_the_first_rejection_wins() -> None:
    registry = with_plugins({"Recording": Recording})
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1")]}, states={"a": ClusterState.UNKNOWN})
    Recording.calls.clear()
    ready_first = Profile.from_config({"filters": ["ClusterReady", "Recording"]}, registry)
    result = Scheduler(fleet, ready_first, registry=registry).schedule(place())
    assert Recording.calls == ["b"]
    assert result.reasons == {"a": "cluster not ready", "b": "recorded"}
    assert result.verdicts[1].status.plugin == "Recording"
    Recording.calls.clear()
    recording_first = Profile.from_config({"filters": ["Recording", "ClusterReady"]}, registry)
    result = Scheduler(fleet, recording_first, registry=registry).schedule(place())
    assert Recording.calls == ["a", "b"]
    assert result.reasons == {"a": "recorded", "b": "recorded"}


class OwnSuccess:
    """A filter that passes with a success status of its own, not the shared ``SUCCESS``."""

    name: ClassVar[str] = "OwnSuccess"

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        if cluster.name == "b":
            return Status(Code.UNSCHEDULABLE, "not b")
        return Status(Code.SUCCESS)


@pytest.mark.parametrize("filters", [["OwnSuccess", "ClusterReady", "NodeFit"],
                                     ["ClusterReady", "NodeFit", "OwnSuccess"]],
                         ids=["first", "last"])
def test_a_plugins_own_success_status_passes_as_the_shared_one_does(filters: list[str]) -> None:
    """The scheduler tells success from the shared ``SUCCESS`` by identity first, then by
    ``ok``: a status of a plugin's own passes the cluster on to the next filter (first),
    and as the last filter's answer passes the cluster (last) - judged afresh and when a
    kept verdict is judged again after its cluster changed."""
    registry = with_plugins({"OwnSuccess": OwnSuccess})
    fleet = fleet_of({"a": [node("a1", "A100", 2)], "b": [node("b1", "A100", 2)],
                      "c": [node("c1", "A100", 2)]}, states={"c": ClusterState.UNKNOWN})
    profile = Profile.from_config({"filters": filters}, registry)
    scheduler = Scheduler(fleet, profile, registry=registry)
    first = scheduler.schedule(place(gpu_milli=1000))
    assert first.cluster == "a"
    assert first.reasons == {"b": "not b", "c": "cluster not ready"}
    assert scheduler.reserve(place(gpu_milli=1000), first) == SUCCESS   # a's nodes change
    again = scheduler.schedule(place("t2", gpu_milli=1000))
    assert again.cluster == "a" and again.reasons == first.reasons
    full = scheduler.schedule(place("t3", gpu_milli=2000))   # a's one card left is too few
    assert full.cluster is None and full.reasons["a"] == "no node with 2 free GPUs"


@pytest.mark.parametrize(("priority", "failover", "wanted"), [
    (0, False, None),
    (0, True, "a"),
    (500, False, "a"),
    (499, False, None),
], ids=["ordinary-blocked", "failover-allowed", "priority-at-threshold", "below-threshold"])
def test_headroom_blocks_ordinary_tasks_only(priority: int, failover: bool,
                                             wanted: str | None) -> None:
    fleet = fleet_of({"a": [node("a1", "A100", 8, free_milli=[0] * 7 + [1000])]}, headroom=0.1)
    result = Scheduler(fleet, headroom_priority=500).schedule(
        place(priority=priority, failover=failover, gpu_milli=1000))
    assert result.cluster == wanted
    if wanted is None:
        assert result.reasons == {"a": "below headroom reserve"}


def test_gang_replicas_spread_over_nodes_of_one_cluster_never_two() -> None:
    fleet = fleet_of({
        "a": [node("a1", "H100", 8), node("a2", "H100", 8, free_milli=[0] * 8)],
        "b": [node("b1", "H100", 8), node("b2", "H100", 8), node("b3", "H100", 8)],
    })
    scheduler = Scheduler(fleet)
    result = scheduler.schedule(place(gpu_milli=8000, replicas=3))
    assert (result.cluster, result.nodes) == ("b", ("b1", "b2", "b3"))
    result = scheduler.schedule(place(gpu_milli=8000, replicas=4))
    assert result.error is not None
    assert result.error.message == (
        "0/2 clusters are available: 1 only 1 of 4 replicas fit on nodes with 8 free GPUs, "
        "1 only 3 of 4 replicas fit on nodes with 8 free GPUs.")


def test_schedule_reserves_nothing_and_reserve_does() -> None:
    fleet = fleet_of({"a": [node("a1", "A100", 2)]})
    scheduler = Scheduler(fleet)
    req = place(gpu_milli=2000)
    result = scheduler.schedule(req)
    assert scheduler.schedule(req).nodes == result.nodes == ("a1",)
    assert scheduler.reserve(req, result) == SUCCESS
    assert fleet.reservation_cluster("t1") == "a"
    assert scheduler.reserve(req, result) == SUCCESS            # idempotent
    again = scheduler.schedule(place("t2", gpu_milli=2000))
    assert again.reasons == {"a": "no node with 2 free GPUs"}
    scheduler.unreserve(req, "a")
    assert scheduler.schedule(place("t2", gpu_milli=2000)).cluster == "a"


class Refusing:
    """A reserve step that always refuses."""

    name: ClassVar[str] = "Refusing"

    def __init__(self, handle: Handle) -> None:
        del handle

    def reserve(self, ctx: CycleState, req: PlacementRequest, cluster: str, fit: Fit) -> Status:
        return Status(Code.UNSCHEDULABLE, "no thanks")

    def unreserve(self, ctx: CycleState, req: PlacementRequest, cluster: str) -> None:
        return None


def test_a_failed_reserve_step_undoes_the_earlier_ones() -> None:
    registry = with_plugins({"Refusing": Refusing})
    profile = Profile.from_config({"reserves": ["FleetReservation", "Refusing"]}, registry)
    fleet = fleet_of({"a": [node("a1")]})
    scheduler = Scheduler(fleet, profile, registry=registry)
    req = place()
    status = scheduler.reserve(req, scheduler.schedule(req))
    assert status == Status(Code.UNSCHEDULABLE, "no thanks", "Refusing")
    assert fleet.reservation_cluster("t1") is None


def test_excluded_clusters_are_skipped() -> None:
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1")]})
    scheduler = Scheduler(fleet)
    assert scheduler.schedule(place()).cluster == "a"
    result = scheduler.schedule(place(exclude=["a"]))
    assert (result.cluster, result.reasons) == ("b", {"a": "cluster excluded"})
    assert scheduler.schedule(place()).cluster == "a"


def test_the_verdict_cache_never_changes_an_answer() -> None:
    """Cached and uncached schedulers agree through random reserves, releases and changes."""
    rng = random.Random(7)
    fleet = fleet_of({
        f"c{i}": [node(f"c{i}n{j}", rng.choice(["H100", "A100", "T4"]), 8,
                       free_milli=[rng.choice([0, 1000, 1000, 500]) for _ in range(8)])
                  for j in range(4)]
        for i in range(5)
    }, headroom=0.1)
    cached, uncached = Scheduler(fleet), Scheduler(fleet, cache=False)
    shapes: list[Reqs] = [{"gpu_milli": 1000}, {"gpu_milli": 4000}, {"gpu_milli": 500},
              {"gpu_milli": 8000, "replicas": 2}, {"cpu": 8}]
    selectors = ["", "gpu-model>=A100", "gpu-model=T4"]
    placed: list[str] = []
    for step in range(400):
        req = place(f"t{step}", rng.choice(selectors), priority=rng.choice([0, 2000]),
                    **rng.choice(shapes))
        got, want = cached.schedule(req), uncached.schedule(req)
        assert (got.cluster, got.nodes, got.reasons) == (want.cluster, want.nodes, want.reasons)
        assert got.scores == want.scores
        if got.cluster is not None and rng.random() < 0.7:
            assert cached.reserve(req, got) == SUCCESS
            placed.append(req.task_id)
        roll = rng.random()
        if roll < 0.2 and placed:
            fleet.release(placed.pop(rng.randrange(len(placed))))
        elif roll < 0.25:
            fleet.set_cordoned(f"c{rng.randrange(5)}", rng.random() < 0.5)
        elif roll < 0.3:
            i, j = rng.randrange(5), rng.randrange(4)
            fleet.apply_delta(f"c{i}", [node(f"c{i}n{j}", "A100", 8,
                                             free_milli=[rng.choice([0, 1000])] * 8)], [])


def test_a_cluster_removed_and_joined_again_is_judged_afresh() -> None:
    fleet = fleet_of({"a": [node("a1", "H100", 8)], "b": [node("b1", "T4", 4)]})
    scheduler = Scheduler(fleet)
    assert scheduler.schedule(place(selector="gpu-model=H100", gpu_milli=1000)).cluster == "a"
    fleet.remove_cluster("a")
    fleet.upsert_cluster("a", labels={}, weight=1, headroom=0.0, state=ClusterState.READY)
    fleet.replace_nodes("a", [node("a1", "T4", 4)])
    result = scheduler.schedule(place(selector="gpu-model=H100", gpu_milli=1000))
    assert result.reasons == {"a": "no node matches fuyao.io/gpu-model=H100",
                              "b": "no node matches fuyao.io/gpu-model=H100"}


def test_a_result_is_a_frozen_value_whatever_way_it_was_built() -> None:
    """``PlacementResult`` writes its fields itself (not the dataclass's ``__init__``): it
    must still default, compare, hash, refuse assignment and copy as the dataclass did."""
    from dataclasses import FrozenInstanceError, replace

    from hub.placement.result import PlacementResult

    plain = PlacementResult("c", ("n0",), None, "A100")
    named = PlacementResult(cluster="c", nodes=("n0",), model="A100",
                            statuses={"c": SUCCESS})
    assert plain == named and hash(plain) == hash(named)
    assert plain.statuses == {} and plain.statuses is not PlacementResult("c", ()).statuses
    assert not plain.table.clusters and plain.fit == Fit(("n0",), "A100")
    assert named.reasons == {} and repr(plain) == (
        "PlacementResult(cluster='c', nodes=('n0',), error=None, model='A100')")
    with pytest.raises(FrozenInstanceError):
        plain.cluster = "d"  # type: ignore[misc]
    moved = replace(named, cluster="d")
    assert (moved.cluster, moved.nodes, moved.model, moved.statuses) == (
        "d", ("n0",), "A100", {"c": SUCCESS})
