"""The scheduler's caches never change an answer: each change reaches the verdicts it affects.

A warm scheduler (its verdicts and fit searches cached) must answer exactly like one without
caches after every kind of fleet change, including changes to one device model's nodes that
only some cached answers depend on. Each case also pins the answer a user would see.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub.fleet import NO_MODEL, Fit, FleetView, find_fit, fit_models
from hub.placement import PlacementResult, Scheduler

from .builders import Reqs, fleet_of, node, place, requests

A100_LABELS = {"fuyao.io/gpu-model": "A100", "fuyao.io/gpu-memory": "80Gi",
               "fuyao.io/gpu-count": "8"}
ZONE = "topology.kubernetes.io/zone"
T4_LABELS = {"fuyao.io/gpu-model": "T4", "fuyao.io/gpu-memory": "16Gi",
             "fuyao.io/gpu-count": "4", ZONE: "x"}


def answer(result: PlacementResult) -> tuple[object, ...]:
    """Everything a user sees of a decision."""
    message = result.error.message if result.error else None
    nearest = result.error.nearest_fit if result.error else None
    return (result.cluster, result.nodes, result.model, result.reasons, result.scores,
            message, nearest)


@dataclass
class Case:
    """A fleet, requests that warm the cache, a change, and what the next decision says."""

    clusters: Mapping[str, Sequence[NodeInfo]]
    request: Reqs
    selector: str = ""
    change: Callable[[FleetView], None] = lambda fleet: None
    cluster: str | None = None
    nodes: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)
    weights: Mapping[str, int] = field(default_factory=dict)
    headroom: float = 0.0
    priority: int = 0


CASES = {
    "cpu taken on the GPU node a CPU task would use": Case(
        {"a": [node("g1", "A100", 8, cpu=64)]}, {"cpu": 8},
        change=lambda f: f.apply_delta("a", [node("g1", "A100", 8, cpu=64, free_cpu=4)], []),
        reasons={"a": "no node with 8 free CPU"}),
    "memory taken on the GPU node a CPU task would use": Case(
        {"a": [node("g1", "T4", 4)]}, {"cpu": 1, "memory_gib": 64},
        change=lambda f: f.apply_delta("a", [node("g1", "T4", 4, free_memory_gib=32)], []),
        reasons={"a": "no node with 1 free CPU and 64Gi free memory"}),
    "an H100 reservation spends the cpu headroom of an A100 task": Case(
        {"a": [node("h1", "H100", 8), node("a1", "A100", 8)]}, {"cpu": 16, "gpu_milli": 1000},
        selector="gpu-model=A100", headroom=0.5,
        change=lambda f: f.reserve("a", "other", requests(cpu=60, gpu_milli=1000), ["h1"]),
        reasons={"a": "below headroom reserve"}),
    "an A100 delta spends the A100 device headroom": Case(
        {"a": [node("a1", "A100", 8), node("a2", "A100", 8), node("h1", "H100", 8)]},
        {"gpu_milli": 1000}, selector="gpu-model=A100", headroom=0.5,
        change=lambda f: f.apply_delta("a", [node("a1", "A100", 8, free_milli=[0] * 8),
                                             node("a2", "A100", 8, free_milli=[0] * 7 + [1000])],
                                       []),
        reasons={"a": "below headroom reserve"}),
    "a T4 change keeps the V100 answer": Case(
        {"a": [node("v1", "V100", 8), node("t1", "T4", 4)], "b": [node("v2", "V100", 8)]},
        {"gpu_milli": 1000}, selector="gpu-model=V100", weights={"a": 2},
        change=lambda f: f.apply_delta("a", [node("t1", "T4", 4, free_milli=[0] * 4)], []),
        cluster="a", nodes=("v1",)),
    "a V100 change moves the V100 task": Case(
        {"a": [node("v1", "V100", 8), node("t1", "T4", 4)], "b": [node("v2", "V100", 8)]},
        {"gpu_milli": 1000}, selector="gpu-model=V100", weights={"a": 2},
        change=lambda f: f.apply_delta("a", [node("v1", "V100", 8, free_milli=[0] * 8)], []),
        cluster="b", nodes=("v2",), reasons={"a": "no node with fuyao.io/gpu-model=V100 and "
                                                  "1 free GPU"}),
    "the last schedulable node is cordoned": Case(
        {"a": [node("c1")]}, {"gpu_milli": 1000},
        change=lambda f: f.apply_delta("a", [node("c1", unschedulable=True)], []),
        reasons={"a": "no schedulable node"}),
    "a model joins the cluster": Case(
        {"a": [node("c1")]}, {"gpu_milli": 1000}, selector="gpu-model=H100",
        change=lambda f: f.apply_delta("a", [node("h1", "H100", 8)], []),
        cluster="a", nodes=("h1",)),
    "a cordoned GPU node comes back": Case(
        {"a": [node("g1", "A100", 8, unschedulable=True), node("c1")]}, {"gpu_milli": 1000},
        selector="gpu-model=A100",
        change=lambda f: f.apply_delta("a", [node("g1", "A100", 8)], []),
        cluster="a", nodes=("g1",)),
    "a GPU change keeps a CPU task on its CPU node": Case(
        {"a": [node("c1", cpu=8), node("g1", "A100", 8)]}, {"cpu": 4},
        change=lambda f: f.apply_delta("a", [node("g1", "A100", 8, free_cpu=1)], []),
        cluster="a", nodes=("c1",)),
    "a full CPU node sends a CPU task to a GPU node": Case(
        {"a": [node("c1", cpu=8), node("g1", "A100", 8)]}, {"cpu": 4},
        change=lambda f: f.apply_delta("a", [node("c1", cpu=8, free_cpu=2)], []),
        cluster="a", nodes=("g1",)),
    "a GPU change reaches a CPU node that shares the GPU nodes' labels": Case(
        {"a": [node("g1", "A100", 8, cpu=16), node("c1", cpu=256, labels=A100_LABELS)]},
        {"cpu": 16},
        change=lambda f: f.apply_delta("a", [node("c1", cpu=256, free_cpu=8,
                                                  labels=A100_LABELS),
                                             node("g1", "A100", 8, cpu=16, free_cpu=15)], []),
        reasons={"a": "no node with 16 free CPU"}),
    "a high-priority task sees the cards others took": Case(
        {"a": [node("a1", "A100", 2)]}, {"gpu_milli": 1000}, headroom=0.5, priority=2000,
        change=lambda f: f.reserve("a", "other", requests(gpu_milli=2000), ["a1"]),
        reasons={"a": "no node with 1 free GPU"}),
    "a per-node selector sees its node fill up": Case(
        {"a": [node("n1"), node("n2", "T4", 4)]}, {"cpu": 8},
        selector="kubernetes.io/hostname=n1",
        change=lambda f: f.apply_delta("a", [node("n1", free_cpu=4)], []),
        reasons={"a": "no node with kubernetes.io/hostname=n1 and 8 free CPU"}),
    "a cordoned GPU node joins a CPU node's label group, which then goes last": Case(
        {"a": [node("n1", labels=T4_LABELS), node("n2", labels={ZONE: "y"})]}, {"cpu": 1},
        change=lambda f: f.apply_delta("a", [node("g1", "T4", 4, labels={ZONE: "x"},
                                                  unschedulable=True)], []),
        cluster="a", nodes=("n2",)),
    "a node moves to another label group": Case(
        {"a": [node("n1", labels={ZONE: "x"}), node("n2", labels={ZONE: "y"}),
               node("n3", labels={ZONE: "y"})]}, {"cpu": 1}, selector=f"{ZONE}=x",
        change=lambda f: f.apply_delta("a", [node("n1", labels={ZONE: "y"})], []),
        reasons={"a": f"no node matches {ZONE}=x"}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_a_warm_cache_sees_the_change(case: Case) -> None:
    fleet = fleet_of(case.clusters, headroom=case.headroom, weights=case.weights)
    warm, cold = Scheduler(fleet), Scheduler(fleet, cache=False)
    req = place("t1", case.selector, priority=case.priority, **case.request)
    # Warm every variant that shares the fit search with this request, then change the fleet.
    for variant in (req, place("t0", case.selector, **case.request),
                    place("t2", case.selector, failover=True, **case.request)):
        warm.schedule(variant)
    case.change(fleet)
    got = warm.schedule(req)
    assert answer(got) == answer(cold.schedule(req))
    assert (got.cluster, got.nodes, got.reasons) == (case.cluster, case.nodes, case.reasons)


def test_a_search_reruns_only_when_nodes_it_read_change() -> None:
    """An H100 reservation re-runs the H100 search and keeps the V100 and CPU ones.

    Read from the fit cache: a kept answer keeps the cluster version it was found at, a
    search done again stamps the version now (a counting wrapper of ``find_fit`` would see
    nothing once ``hub.native`` compiled the scheduler: compiled calls are direct)."""
    fleet = fleet_of({"a": [node("h1", "H100", 8), node("h2", "H100", 8),
                            node("v1", "V100", 8), node("c1")]})
    scheduler = Scheduler(fleet)
    tasks: dict[str, Reqs] = {"gpu-model=H100": {"gpu_milli": 1000},
                              "gpu-model=V100": {"gpu_milli": 1000}, "": {"cpu": 1}}
    reqs = [place(f"t{i}", sel, **r) for i, (sel, r) in enumerate(tasks.items())]

    def found_at() -> dict[str, int]:
        """Each request's kept search: the cluster version it was found at."""
        entries = scheduler._fits._entries["a"]
        ids = scheduler._fit_ids
        return {req.selector_key: entries[ids[(req.selector_key, req.requests)]][1]
                for req in reqs}

    for req in reqs:
        scheduler.schedule(req)
    before = found_at()
    assert len(before) == 3
    fleet.reserve("a", "h", requests(gpu_milli=1000), ["h1"], model="H100")
    for req in reqs:
        scheduler.schedule(req)
    after = found_at()
    assert [key for key in after if after[key] != before[key]] == ["fuyao.io/gpu-model=H100"]
    cluster = fleet.cluster("a")
    assert cluster is not None and after["fuyao.io/gpu-model=H100"] == cluster.version


FIT_MODELS = {
    "GPU task reads the models with enough device memory": (
        [node("h1", "H100", 8), node("v1", "V100", 8), node("c1")], "",
        requests(gpu_milli=1000, gpu_memory_gib=40), ("H100",)),
    "GPU task reads every matched model": (
        [node("h1", "H100", 8), node("v1", "V100", 8), node("c1")], "",
        requests(gpu_milli=1000), ("H100", "V100")),
    "CPU task that fits on a CPU-only group reads only those": (
        [node("h1", "H100", 8), node("c1")], "", requests(), (NO_MODEL,)),
    "CPU task on a GPU node reads every model": (
        [node("h1", "H100", 8), node("c1", free_cpu=0)], "", requests(), (NO_MODEL, "H100")),
    "no group matches: only the layout": (
        [node("h1", "H100", 8)], "gpu-model=T4", requests(gpu_milli=1000), ()),
}


@pytest.mark.parametrize(("nodes", "selector", "reqs", "wanted"), FIT_MODELS.values(),
                         ids=FIT_MODELS)
def test_fit_models(nodes: list[NodeInfo], selector: str, reqs: TaskRequests,
                    wanted: tuple[str, ...]) -> None:
    cluster = fleet_of({"c": nodes}).cluster("c")
    assert cluster is not None
    sel = parse_selector(selector)
    found = find_fit(cluster, sel, str(sel), reqs)
    assert fit_models(cluster, sel, str(sel), reqs, found) == wanted


def test_model_versions_move_only_for_the_models_a_change_touches() -> None:
    fleet = fleet_of({"c": [node("h1", "H100", 8), node("v1", "V100", 8), node("c1")]})
    c = fleet.cluster("c")
    assert c is not None
    before = {m: c.model_version(m) for m in ("H100", "V100", NO_MODEL)}
    layout = c.layout_version
    fleet.reserve("c", "t", requests(gpu_milli=1000), ["h1"])
    assert c.model_version("H100") > before["H100"]
    assert (c.model_version("V100"), c.model_version(NO_MODEL)) == (before["V100"],
                                                                    before[NO_MODEL])
    assert c.layout_version == layout
    assert isinstance(find_fit(c, parse_selector(""), "", requests()), Fit)


def random_node(rng: random.Random, name: str) -> NodeInfo:
    model = rng.choice(["H100", "A100", "T4", None, None])
    labels = {ZONE: rng.choice(["x", "y"])}
    if rng.random() < 0.2:
        labels |= A100_LABELS   # a mislabelled node: shares the A100 group
    gpus = 0 if model is None else rng.choice([2, 4])
    return node(name, model, gpus, cpu=rng.choice([8, 16]), memory_gib=rng.choice([32, 64]),
                free_cpu=rng.choice([None, 2, 6]), free_memory_gib=rng.choice([None, 8]),
                free_pods=rng.choice([None, None, 0]),
                free_milli=[rng.choice([0, 250, 1000, 1000]) for _ in range(gpus)],
                device_gib=rng.choice([None, 40]) if model == "A100" else None,
                labels=labels, unschedulable=rng.random() < 0.1)


def test_cached_and_uncached_agree_through_random_changes() -> None:
    rng = random.Random(11)
    names = [f"c{i}" for i in range(4)]
    fleet = fleet_of({c: [random_node(rng, f"{c}n{j}") for j in range(5)] for c in names},
                     headroom=0.1)
    cached, plain = Scheduler(fleet, headroom_priority=500), Scheduler(
        fleet, headroom_priority=500, cache=False)
    shapes: list[Reqs] = [{"gpu_milli": 1000}, {"gpu_milli": 2000, "replicas": 2},
                          {"gpu_milli": 250}, {"gpu_milli": 1000, "gpu_memory_gib": 60},
                          {"cpu": 2}, {"cpu": 4, "memory_gib": 8, "replicas": 3}]
    selectors = ["", "gpu-model>=A100", f"{ZONE}=y", "kubernetes.io/hostname=c1n2",
                 "gpu-model=T4"]
    live: list[str] = []
    for step in range(700):
        req = place(f"t{step}", rng.choice(selectors), priority=rng.choice([0, 0, 600]),
                    failover=rng.random() < 0.1,
                    exclude=[rng.choice(names)] if rng.random() < 0.05 else [],
                    **rng.choice(shapes))
        got = cached.schedule(req)
        assert answer(got) == answer(plain.schedule(req)), step
        if got.cluster is not None and rng.random() < 0.6:
            cached.reserve(req, got)
            live.append(req.task_id)
        change(rng, fleet, names, live)


def change(rng: random.Random, fleet: FleetView, names: list[str], live: list[str]) -> None:
    """One random fleet change (or none)."""
    roll = rng.random()
    cluster = rng.choice(names)
    if roll < 0.25 and live:
        fleet.release(live.pop(rng.randrange(len(live))))
    elif roll < 0.55:
        fleet.apply_delta(cluster, [random_node(rng, f"{cluster}n{rng.randrange(6)}")], [])
    elif roll < 0.6:
        fleet.apply_delta(cluster, [], [f"{cluster}n{rng.randrange(6)}"])
    elif roll < 0.65:
        fleet.set_cordoned(cluster, rng.random() < 0.3)
    elif roll < 0.68:
        fleet.set_state(cluster, rng.choice([ClusterState.READY, ClusterState.READY,
                                             ClusterState.NOT_READY]))
    elif roll < 0.72:
        fleet.upsert_cluster(cluster, labels={}, weight=rng.randint(0, 3),
                             headroom=rng.choice([0.0, 0.1, 0.3]),
                             state=ClusterState.READY)


def test_a_cluster_that_joins_later_is_judged() -> None:
    fleet = fleet_of({"b": [node("b1", "T4", 4)]})
    scheduler = Scheduler(fleet)
    req = place(selector="gpu-model=H100", gpu_milli=1000)
    assert scheduler.schedule(req).cluster is None
    fleet.upsert_cluster("a", labels={}, weight=1, headroom=0.0, state=ClusterState.READY)
    fleet.replace_nodes("a", [node("a1", "H100", 8)])
    assert scheduler.schedule(req).cluster == "a"
    fleet.remove_cluster("a")
    assert scheduler.schedule(req).reasons == {"b": "no node matches fuyao.io/gpu-model=H100"}


def test_changed_since_lists_the_clusters_changed_after_a_tick() -> None:
    fleet = fleet_of({"a": [node("a1")], "b": [node("b1", "T4", 4)], "c": [node("c1")]})
    tick = fleet.tick
    assert fleet.changed_since(tick) == []
    fleet.reserve("b", "t1", requests(gpu_milli=500), ["b1"])
    fleet.set_cordoned("a", True)
    fleet.release("t1")
    assert [c.name for c in fleet.changed_since(tick)] == ["b", "a"]
    fleet.remove_cluster("b")
    assert [c.name for c in fleet.changed_since(tick)] == ["a"]
    assert fleet.changed_since(fleet.tick) == []
