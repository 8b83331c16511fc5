"""Each built-in plugin on its own: a name, the input cluster, the exact wanted status."""

from __future__ import annotations

import pytest

from fuyao.inventory import NodeInfo
from fuyao.spec import ClusterState
from hub.fleet import Fit, FleetView
from hub.placement import SUCCESS, Code, CycleState, Handle, PlacementRequest, Status
from hub.placement.plugins import cluster_ready, headroom, node_fit, task_selector
from hub.placement.plugins.cluster_ready import ClusterReady
from hub.placement.plugins.cluster_weight import ClusterWeight
from hub.placement.plugins.fleet_reservation import FleetReservation
from hub.placement.plugins.headroom import Headroom
from hub.placement.plugins.node_fit import NodeFit
from hub.placement.plugins.task_selector import TaskSelector

from .builders import Reqs, fleet_of, node, place

UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def run_filter(plugin_cls: type, fleet: FleetView, req: PlacementRequest,
               cluster: str = "c1", ctx: CycleState | None = None) -> Status:
    info = fleet.cluster(cluster)
    assert info is not None
    plugin = plugin_cls(Handle(fleet, headroom_priority=1000))
    result: Status = plugin.filter(ctx or CycleState(), req, info)
    return result


# -- ClusterReady ---------------------------------------------------------------------------

READY_CASES = [
    ("ready", ClusterState.READY, False, (), SUCCESS),
    ("cordoned-flag", ClusterState.READY, True, (),
     Status(UNSCHED, cluster_ready.REASON_CORDONED, "ClusterReady")),
    ("cordoned-state", ClusterState.CORDONED, False, (),
     Status(UNSCHED, cluster_ready.REASON_CORDONED, "ClusterReady")),
    ("unknown", ClusterState.UNKNOWN, False, (),
     Status(UNSCHED, cluster_ready.REASON_NOT_READY, "ClusterReady")),
    ("not-ready", ClusterState.NOT_READY, False, (),
     Status(UNSCHED, cluster_ready.REASON_NOT_READY, "ClusterReady")),
    ("joining", ClusterState.JOINING, False, (),
     Status(UNSCHED, cluster_ready.REASON_NOT_READY, "ClusterReady")),
    ("excluded", ClusterState.READY, False, ("c1",),
     Status(UNRESOLVABLE, cluster_ready.REASON_EXCLUDED, "ClusterReady")),
    ("other-excluded", ClusterState.READY, False, ("c2",), SUCCESS),
]


@pytest.mark.parametrize(("state", "cordoned", "exclude", "wanted"),
                         [c[1:] for c in READY_CASES], ids=[c[0] for c in READY_CASES])
def test_cluster_ready(state: ClusterState, cordoned: bool, exclude: tuple[str, ...],
                       wanted: Status) -> None:
    fleet = fleet_of({"c1": [node("n1")]}, states={"c1": state})
    fleet.set_cordoned("c1", cordoned)
    assert run_filter(ClusterReady, fleet, place(exclude=exclude)) == wanted


# -- TaskSelector ---------------------------------------------------------------------------

SELECTOR_CASES = [
    ("empty-selector", [node("n1")], "", SUCCESS),
    ("some-node-matches", [node("n1", "V100", 4), node("n2", "H100", 8)], "gpu-model>=A100",
     SUCCESS),
    ("none-matches", [node("n1", "V100", 4)], "gpu-model>=A100",
     Status(UNRESOLVABLE, "no node matches fuyao.io/gpu-model>=A100", "TaskSelector")),
    ("no-nodes", [], "", Status(UNSCHED, task_selector.REASON_NO_NODES, "TaskSelector")),
    ("hostname", [node("n1"), node("n2")], "kubernetes.io/hostname=n2", SUCCESS),
    ("hostname-missing", [node("n1")], "kubernetes.io/hostname=n2",
     Status(UNRESOLVABLE, "no node matches kubernetes.io/hostname=n2", "TaskSelector")),
]


@pytest.mark.parametrize(("nodes", "selector", "wanted"),
                         [c[1:] for c in SELECTOR_CASES], ids=[c[0] for c in SELECTOR_CASES])
def test_task_selector(nodes: list[NodeInfo], selector: str, wanted: Status) -> None:
    assert run_filter(TaskSelector, fleet_of({"c1": nodes}), place(selector=selector)) == wanted


# -- NodeFit --------------------------------------------------------------------------------

def fit_status(reason: str) -> Status:
    return Status(UNSCHED, reason, "NodeFit")


NODE_FIT_CASES: list[tuple[str, list[NodeInfo], str, Reqs, Status]] = [
    ("fits", [node("n1", "A100", 8)], "gpu-model>=A100", {"gpu_milli": 4000}, SUCCESS),
    ("too-few-free-cards", [node("n1", "A100", 8, free_milli=[0] * 5 + [1000] * 3)],
     "gpu-model>=A100", {"gpu_milli": 4000},
     fit_status("no node with fuyao.io/gpu-model>=A100 and 4 free GPUs")),
    ("one-card-no-selector", [node("n1", "A100", 1, free_milli=[0])], "", {"gpu_milli": 1000},
     fit_status("no node with 1 free GPU")),
    ("device-memory", [node("n1", "V100", 8)], "", {"gpu_milli": 2000, "gpu_memory_gib": 40},
     fit_status("no node with 2 free GPUs of >=40Gi")),
    ("share", [node("n1", "T4", 1, free_milli=[200])], "gpu-model=T4", {"gpu_milli": 500},
     fit_status("no node with fuyao.io/gpu-model=T4 and 500m free on one GPU")),
    ("cpu", [node("n1", "A100", 8, free_cpu=2)], "", {"cpu": 4, "gpu_milli": 1000},
     fit_status("no node with 1 free GPU and 4 free CPU")),
    ("memory", [node("n1", free_memory_gib=1)], "", {"cpu": 0.5, "memory_gib": 2},
     fit_status("no node with 500m free CPU and 2Gi free memory")),
    ("pods", [node("n1", free_pods=0)], "", {},
     fit_status("no node with 1 free CPU and 1Gi free memory and a free pod slot")),
    ("gang", [node("n1", "H100", 8), node("n2", "H100", 8)], "gpu-model=H100",
     {"gpu_milli": 8000, "replicas": 3},
     fit_status("only 2 of 3 replicas fit on nodes with fuyao.io/gpu-model=H100 and 8 free GPUs")),
    ("gang-cpu-only", [node("n1", cpu=4)], "", {"cpu": 2, "replicas": 3},
     fit_status("only 2 of 3 replicas fit on nodes with 2 free CPU and 1Gi free memory")),
    ("no-match", [node("n1", "T4", 4)], "gpu-model=H100", {"gpu_milli": 1000},
     Status(UNRESOLVABLE, "no node matches fuyao.io/gpu-model=H100", "NodeFit")),
    ("all-cordoned", [node("n1", unschedulable=True)], "", {},
     Status(UNSCHED, node_fit.REASON_NO_NODES, "NodeFit")),
]


@pytest.mark.parametrize(("nodes", "selector", "reqs", "wanted"),
                         [c[1:] for c in NODE_FIT_CASES], ids=[c[0] for c in NODE_FIT_CASES])
def test_node_fit(nodes: list[NodeInfo], selector: str, reqs: Reqs,
                  wanted: Status) -> None:
    req = place(selector=selector, **reqs)
    assert run_filter(NodeFit, fleet_of({"c1": nodes}), req) == wanted


def test_node_fit_records_the_fit_for_later_plugins() -> None:
    ctx = CycleState()
    fleet = fleet_of({"c1": [node("n1", "H100", 8), node("n2", "H100", 8)]})
    req = place(gpu_milli=8000, replicas=2)
    assert run_filter(NodeFit, fleet, req, ctx=ctx) == SUCCESS
    assert ctx.fits["c1"] == Fit(("n1", "n2"), "H100")


# -- Headroom -------------------------------------------------------------------------------

BELOW = Status(UNSCHED, headroom.REASON_HEADROOM, "Headroom")
# One cluster: 10 A100 cards on one node (64 cpu, 512Gi), headroom 0.2.
HEADROOM_CASES: list[tuple[str, int, Reqs, int, bool, Status]] = [
    ("stays-out-of-reserve", 10, {"gpu_milli": 8000}, 0, False, SUCCESS),
    ("eats-into-reserve", 10, {"gpu_milli": 9000}, 0, False, BELOW),
    ("already-in-reserve", 1, {"gpu_milli": 1000}, 0, False, BELOW),
    ("failover-may-use-reserve", 10, {"gpu_milli": 9000}, 0, True, SUCCESS),
    ("high-priority-may-use-reserve", 10, {"gpu_milli": 9000}, 1000, False, SUCCESS),
    ("priority-just-below-threshold", 10, {"gpu_milli": 9000}, 999, False, BELOW),
    ("cpu-counts-too", 10, {"cpu": 60}, 0, False, BELOW),
    ("memory-counts-too", 10, {"memory_gib": 450}, 0, False, BELOW),
    ("shares-count-in-milli", 2, {"gpu_milli": 500}, 0, False, BELOW),
]


@pytest.mark.parametrize(("free_cards", "reqs", "priority", "failover", "wanted"),
                         [c[1:] for c in HEADROOM_CASES], ids=[c[0] for c in HEADROOM_CASES])
def test_headroom_filter(free_cards: int, reqs: Reqs, priority: int,
                         failover: bool, wanted: Status) -> None:
    frees = [1000] * free_cards + [0] * (10 - free_cards)
    fleet = fleet_of({"c1": [node("n1", "A100", 10, free_milli=frees)]}, headroom=0.2)
    req = place(priority=priority, failover=failover, **reqs)
    assert run_filter(Headroom, fleet, req) == wanted


def test_headroom_counts_only_the_model_it_would_use() -> None:
    # 7 of 8 T4s are busy: a T4 task would eat the reserve; an A100 task is still fine.
    fleet = fleet_of({"c1": [node("n1", "A100", 8),
                             node("n2", "T4", 8, free_milli=[0] * 7 + [1000])]},
                     headroom=0.2)
    assert run_filter(Headroom, fleet, place(gpu_milli=1000)) == SUCCESS
    assert run_filter(Headroom, fleet, place(selector="gpu-model=T4", gpu_milli=1000)) == BELOW


SCORE_CASES: list[tuple[Reqs, float]] = [
    ({"cpu": 0, "memory_gib": 0}, 100.0),
    ({"gpu_milli": 4000, "cpu": 0, "memory_gib": 0}, 50.0),
    ({"cpu": 16, "memory_gib": 0}, 75.0),
    ({"cpu": 1, "memory_gib": 256, "gpu_milli": 1000}, 50.0),
]


@pytest.mark.parametrize(("reqs", "wanted"), SCORE_CASES, ids=[
    "nothing-used", "half-the-cards", "quarter-of-cpu", "tightest-resource-wins"])
def test_headroom_score_is_room_left_after(reqs: Reqs, wanted: float) -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 8, cpu=64, memory_gib=512)]}, headroom=0.1)
    info = fleet.cluster("c1")
    assert info is not None
    plugin = Headroom(Handle(fleet))
    assert plugin.score(CycleState(), place(**reqs), info) == pytest.approx(wanted)


# -- ClusterWeight --------------------------------------------------------------------------

@pytest.mark.parametrize(("weights", "wanted"), [
    ({"a": 1, "b": 4}, {"a": 25.0, "b": 100.0}),
    ({"a": 3, "b": 3}, {"a": 100.0, "b": 100.0}),
    ({"a": 0, "b": 0}, {"a": 0.0, "b": 0.0}),
], ids=["proportional", "equal", "all-zero"])
def test_cluster_weight(weights: dict[str, int], wanted: dict[str, float]) -> None:
    fleet = fleet_of({name: [node(f"{name}1")] for name in weights}, weights=weights)
    ctx, req = CycleState(), place()
    plugin = ClusterWeight(Handle(fleet))
    names = [c.name for c in fleet.clusters()]
    scores = [plugin.score(ctx, req, c) for c in fleet.clusters()]
    assert scores == [float(weights[n]) for n in names]   # raw: the weight
    plugin.normalize(ctx, req, names, scores)
    assert dict(zip(names, scores, strict=True)) == wanted


# -- FleetReservation -----------------------------------------------------------------------

def test_fleet_reservation_reserves_and_unreserves_its_cluster_only() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 1)], "c2": [node("n2")]})
    plugin = FleetReservation(Handle(fleet))
    req = place(gpu_milli=1000)
    assert plugin.reserve(CycleState(), req, "c1", Fit(("n1",), "A100")) == SUCCESS
    assert fleet.reservation_cluster("t1") == "c1"
    plugin.unreserve(CycleState(), req, "c2")
    assert fleet.reservation_cluster("t1") == "c1"
    plugin.unreserve(CycleState(), req, "c1")
    assert fleet.reservation_cluster("t1") is None


def test_fleet_reservation_clash_is_a_status() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 1)]})
    plugin = FleetReservation(Handle(fleet))
    assert plugin.reserve(CycleState(), place("t1", gpu_milli=1000), "c1",
                          Fit(("n1",), "A100")).ok
    status = plugin.reserve(CycleState(), place("t2", gpu_milli=1000), "c1",
                            Fit(("n1",), "A100"))
    assert status == Status(UNSCHED, "node n1 of cluster c1 no longer has room for 1 replica(s)",
                            "FleetReservation")
