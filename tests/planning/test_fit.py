"""``capacity fit``: counts on small fleets whose answers are known by hand."""

from __future__ import annotations

import pytest

from fuyao.capacity import FitRequest
from fuyao.spec import ClusterState, TaskSpec
from hub.fleet import FleetView
from hub.placement import DEFAULT_PROFILE
from hub.planning.fit import count_fit
from hub.planning.snapshot import copy_fleet
from tests.placement.builders import fleet_of, node

HALF_USED = [1000, 1000, 1000, 1000, 500, 500, 0, 0]   # 4 whole cards + 2 half cards free


def two_clusters(headroom_a: float = 0.0) -> FleetView:
    """a: 2 nodes x 8 H100 (a2 partly used: 3 cards' worth); b: one node with 4 T4."""
    fleet = fleet_of({
        "a": [node("a1", "H100", 8), node("a2", "H100", 8, free_milli=HALF_USED)],
        "b": [node("b1", "T4", 4)],
    })
    fleet.upsert_cluster("a", labels={}, weight=1, headroom=headroom_a, state=ClusterState.READY)
    return fleet


def fit(fleet: FleetView, limit: int = 10_000, **spec: object) -> tuple[int, dict[str, int],
                                                                       dict[str, str]]:
    answer = count_fit(fleet, DEFAULT_PROFILE, TaskSpec(name="x", **spec),  # type: ignore[arg-type]
                       limit=limit)
    return answer.total, answer.clusters, answer.limited_by


@pytest.mark.parametrize(("headroom", "gpu", "model", "want"), [
    # whole cards: a1 takes 8, a2 its 4 whole free ones; b 4 T4
    (0.0, 1, None, {"a": 12, "b": 4}),
    # half cards: a1 16 halves, a2 8 halves on whole cards + 1 on each half-free card
    (0.0, 0.5, None, {"a": 26, "b": 8}),
    # 25% headroom on a (16 cards, 3 used): used + new <= 12 cards -> 9 whole, 18 halves
    (0.25, 1, None, {"a": 9, "b": 4}),
    (0.25, 0.5, None, {"a": 18, "b": 8}),
    # two cards per task: a1 4, a2 2; the selector keeps T4 out
    (0.0, 2, "H100", {"a": 6, "b": 0}),
    (0.0, 8, None, {"a": 1, "b": 0}),
])
def test_fit_counts_known_by_hand(headroom: float, gpu: float, model: str | None,
                                  want: dict[str, int]) -> None:
    total, clusters, _ = fit(two_clusters(headroom), gpu=gpu, gpu_model=model)
    assert clusters == want
    assert total == sum(want.values())


def test_headroom_is_named_as_what_limits_the_cluster() -> None:
    _, _, limited = fit(two_clusters(0.25), gpu=1)
    assert limited["a"] == "below headroom reserve"
    assert "b" in limited


def test_high_priority_may_use_the_headroom() -> None:
    total, clusters, _ = fit(two_clusters(0.25), gpu=1, priority=1000)
    assert clusters == {"a": 12, "b": 4} and total == 16


def test_cpu_and_memory_per_node_limit_the_count() -> None:
    fleet = fleet_of({"c": [node("c1", cpu=8, memory_gib=64), node("c2", cpu=8, memory_gib=8)]})
    total, _, _ = fit(fleet, cpu=3, memory="6Gi")
    assert total == 2 + 1        # c1: 8 cores -> 2; c2: 8 GiB -> 1


def test_the_limit_caps_the_count_and_says_so() -> None:
    answer = count_fit(two_clusters(), DEFAULT_PROFILE, TaskSpec(name="x", gpu=1), limit=5)
    assert answer.total == 5 and answer.capped and "limit" in answer.limited_by


def test_a_quota_probe_bounds_the_count() -> None:
    answer = count_fit(two_clusters(), DEFAULT_PROFILE, TaskSpec(name="x", gpu=1), limit=100,
                       quota=lambda queue, spec: 3)
    assert answer.total == 3 and answer.limited_by["quota"].startswith("queue default quota")


def test_counting_leaves_the_live_view_untouched() -> None:
    fleet = two_clusters()
    before = [r.model_dump() for r in fleet.capacity()]
    fit(fleet, gpu=1)
    assert [r.model_dump() for r in fleet.capacity()] == before


def test_hub_reservations_are_spent_capacity_on_the_copy() -> None:
    fleet = two_clusters()
    fleet.reserve("b", "held", TaskSpec(name="h", gpu=3).requests(), ["b1"])
    copy = copy_fleet(fleet)
    assert [r.devices_allocated for r in copy.capacity("b")] == [3.0]
    assert fit(fleet, gpu=1)[1]["b"] == 1


def test_cordoned_and_not_ready_clusters_take_nothing() -> None:
    fleet = two_clusters()
    fleet.set_cordoned("b", True)
    fleet.set_state("a", ClusterState.NOT_READY)
    total, clusters, limited = fit(fleet, gpu=1)
    assert total == 0 and clusters == {"a": 0, "b": 0}
    assert set(limited) == {"a", "b"}


def test_fit_request_validates_before_counting() -> None:
    with pytest.raises(ValueError, match="gpu"):
        FitRequest(gpu="lots").task_spec()
    with pytest.raises(ValueError):
        FitRequest(replicas=0)
