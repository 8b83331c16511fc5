"""The indexed fit search: which nodes take a task's replicas, and why none do.

Table-driven cases for the behaviour a user sees (nodes chosen, the requirement that was
missing), then a randomized comparison against a brute-force scan of every node.
"""

from __future__ import annotations

import random

import pytest

from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub.fleet import Fit, FleetView, Miss, MissKind, find_fit

from .builders import fleet_of, node, requests
from .oracle import naive_fit


def search(nodes: list[NodeInfo], selector: str, r: TaskRequests) -> Fit | Miss:
    fleet = fleet_of({"c1": nodes})
    cluster = fleet.cluster("c1")
    assert cluster is not None
    sel = parse_selector(selector)
    return find_fit(cluster, sel, str(sel), r)


CASES = [
    # (id, nodes, selector, requests, wanted)
    ("one-whole-card", [node("n1", "A100", 8)], "", requests(gpu_milli=1000),
     Fit(("n1",), "A100")),
    ("tightest-node-first", [node("n1", "A100", 8), node("n2", "A100", 8, free_milli=[1000] * 4 +
                                                            [0] * 4)],
     "", requests(gpu_milli=4000), Fit(("n2",), "A100")),
    ("cards-must-be-on-one-node", [node("n1", "A100", 2), node("n2", "A100", 2)], "",
     requests(gpu_milli=4000), Miss(MissKind.GPU)),
    ("partly-used-card-is-not-whole", [node("n1", "A100", 1, free_milli=[999])], "",
     requests(gpu_milli=1000), Miss(MissKind.GPU)),
    ("device-memory-too-small", [node("n1", "V100", 8)], "", requests(gpu_milli=1000,
                                                                        gpu_memory_gib=40),
     Miss(MissKind.GPU)),
    ("device-memory-enough", [node("n1", "V100", 8), node("n2", "A100", 8)], "",
     requests(gpu_milli=1000, gpu_memory_gib=40), Fit(("n2",), "A100")),
    ("share-packs-onto-used-card", [node("n1", "T4", 2), node("n2", "T4", 2,
                                                               free_milli=[600, 1000])],
     "", requests(gpu_milli=500), Fit(("n2",), "T4")),
    ("share-too-big-for-leftovers", [node("n1", "T4", 2, free_milli=[400, 300])], "",
     requests(gpu_milli=500), Miss(MissKind.GPU)),
    ("selector-model-rank", [node("n1", "V100", 8), node("n2", "H100", 8)],
     "gpu-model>=A100", requests(gpu_milli=1000), Fit(("n2",), "H100")),
    ("selector-matches-nothing", [node("n1", "V100", 8)], "gpu-model>=A100",
     requests(gpu_milli=1000), Miss(MissKind.NO_MATCH)),
    ("cpu-short-on-gpu-node", [node("n1", "A100", 8, free_cpu=2)], "",
     requests(cpu=4, gpu_milli=1000), Miss(MissKind.CPU)),
    ("memory-short", [node("n1", free_memory_gib=8)], "", requests(cpu=1, memory_gib=16),
     Miss(MissKind.MEMORY)),
    ("no-pod-slot", [node("n1", free_pods=0)], "", requests(), Miss(MissKind.PODS)),
    ("unschedulable-node-skipped", [node("n1", "A100", 8, unschedulable=True),
                                    node("n2", "A100", 8)], "", requests(gpu_milli=1000),
     Fit(("n2",), "A100")),
    ("only-unschedulable-nodes", [node("n1", unschedulable=True)], "", requests(),
     Miss(MissKind.NO_NODES)),
    ("cpu-task-prefers-cpu-nodes", [node("g1", "A100", 8), node("c1")], "", requests(),
     Fit(("c1",), None)),
    ("gang-spreads-over-nodes", [node("n1", "H100", 8), node("n2", "H100", 8)], "",
     requests(gpu_milli=8000, replicas=2), Fit(("n1", "n2"), "H100")),
    ("gang-shares-a-node", [node("n1", "H100", 8)], "", requests(gpu_milli=4000, replicas=2),
     Fit(("n1", "n1"), "H100")),
    ("gang-one-short", [node("n1", "H100", 8), node("n2", "H100", 8)], "",
     requests(gpu_milli=8000, replicas=3), Miss(MissKind.GANG, placed=2)),
    ("gang-cpu-limits-replicas-per-node", [node("n1", cpu=4), node("n2", cpu=4)], "",
     requests(cpu=2, replicas=5), Miss(MissKind.GANG, placed=4)),
    ("gang-never-mixes-models", [node("n1", "H100", 8), node("n2", "A100", 8)],
     "gpu-model>=A100", requests(gpu_milli=8000, replicas=2), Miss(MissKind.GANG, placed=1)),
    ("hostname-selector-checked-per-node", [node("n1"), node("n2")],
     "kubernetes.io/hostname=n2", requests(), Fit(("n2",), None)),
    ("hostname-selector-no-node", [node("n1"), node("n2")], "kubernetes.io/hostname=n3",
     requests(), Miss(MissKind.CPU)),
]


@pytest.mark.parametrize(("nodes", "selector", "reqs", "wanted"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fit_search(nodes: list[NodeInfo], selector: str, reqs: TaskRequests,
                    wanted: Fit | Miss) -> None:
    assert search(nodes, selector, reqs) == wanted


def test_fit_sees_hub_reservations() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 8)]})
    r = requests(gpu_milli=4000)
    fleet.reserve("c1", "t1", r, ["n1"])
    cluster = fleet.cluster("c1")
    assert cluster is not None
    sel = parse_selector("")
    assert find_fit(cluster, sel, "", r) == Fit(("n1",), "A100")
    fleet.reserve("c1", "t2", r, ["n1"])
    assert find_fit(cluster, sel, "", r) == Miss(MissKind.GPU)
    fleet.release("t1")
    assert find_fit(cluster, sel, "", r) == Fit(("n1",), "A100")


def test_a_search_asked_again_sees_devices_freed_since() -> None:
    """The same request asked again after the cluster changed searches what is there now:
    devices freed since the last answer (no room then) are found, models that gained
    room come first."""
    fleet = fleet_of({"c1": [node("n1", "A100", 4), node("n2", "H100", 4)]})
    r = requests(gpu_milli=4000)
    fleet.reserve("c1", "t1", r, ["n1"])
    fleet.reserve("c1", "t2", r, ["n2"])
    cluster = fleet.cluster("c1")
    assert cluster is not None
    sel = parse_selector("")
    assert find_fit(cluster, sel, "", r) == Miss(MissKind.GPU)
    fleet.release("t2")
    assert find_fit(cluster, sel, "", r) == Fit(("n2",), "H100")
    fleet.release("t1")
    fleet.reserve("c1", "t3", requests(gpu_milli=1000), ["n2"])
    assert find_fit(cluster, sel, "", r) == Fit(("n1",), "A100")


# -- randomized: index vs brute force ------------------------------------------------------

SELECTORS = ["", "gpu-model>=A100", "gpu-model=T4", "gpu-memory>=40Gi", "zone=a",
             "zone in (a, b), gpu-model notin (V100)", "!fuyao.io/gpu-model"]
MODELS = [("H100", 8), ("A100", 8), ("V100", 4), ("T4", 4), (None, 0)]


def random_node(rng: random.Random, name: str) -> NodeInfo:
    model, count = rng.choice(MODELS)
    frees = [rng.choice([0, 1000, 1000, 1000, rng.randrange(0, 1000, 50)]) for _ in range(count)]
    return node(
        name, model, count, cpu=64, free_cpu=rng.choice([0, 2, 8, 30, 64]),
        free_memory_gib=rng.choice([4, 64, 256, 512]), free_pods=rng.choice([0, 3, 110]),
        free_milli=frees, labels={"zone": rng.choice("abc")},
        unschedulable=rng.random() < 0.05,
    )


def random_requests(rng: random.Random) -> TaskRequests:
    gpu = rng.choice([0, 0, 1000, 2000, 4000, 8000, 250, 500, 700])
    return requests(
        cpu=rng.choice([0.5, 2, 8, 16]), memory_gib=rng.choice([1, 16, 100]), gpu_milli=gpu,
        gpu_memory_gib=rng.choice([0, 0, 20, 60]) if gpu else 0,
        replicas=rng.choice([1, 1, 1, 2, 4, 9]),
    )


@pytest.mark.parametrize("seed", range(6))
def test_index_agrees_with_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    fleet = FleetView()
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0, state=ClusterState.READY)
    fleet.replace_nodes("c1", [random_node(rng, f"n{i}") for i in range(40)])
    cluster = fleet.cluster("c1")
    assert cluster is not None
    for step in range(300):
        sel = parse_selector(rng.choice(SELECTORS))
        r = random_requests(rng)
        got = find_fit(cluster, sel, str(sel), r)
        kind, placed = naive_fit(cluster, sel, r)
        if kind is None:
            assert isinstance(got, Fit), (step, sel, r, got)
            assert len(got.nodes) == r.replicas
            fleet.reserve("c1", f"t{step}", r, got.nodes, model=got.model)  # must not Conflict
        else:
            assert got == Miss(kind, placed if kind is MissKind.GANG else 0), (step, sel, r)
        if rng.random() < 0.3:
            fleet.apply_delta("c1", [random_node(rng, f"n{rng.randrange(45)}")],
                              [f"n{rng.randrange(45)}"])
        if rng.random() < 0.3 and step:
            fleet.release(f"t{rng.randrange(step)}")


def search_with_headroom(nodes: list[NodeInfo], r: TaskRequests, headroom: float) -> Fit | Miss:
    fleet = fleet_of({"c1": nodes}, headroom=headroom)
    cluster = fleet.cluster("c1")
    assert cluster is not None
    sel = parse_selector("")
    return find_fit(cluster, sel, str(sel), r)


T4_NEARLY_FULL = node("t4", "T4", 8, free_milli=[0] * 7 + [1000])
A100_EMPTY = node("a100", "A100", 8)

MODEL_CHOICE = [
    # (id, nodes, requests, headroom, wanted): one replica of a task naming no model goes to
    # the tightest node of any model (as a best-fit member binds it), sparing models whose
    # headroom reserve it would eat.
    ("tightest-model-wins", [A100_EMPTY, T4_NEARLY_FULL], requests(gpu_milli=1000), 0.0,
     Fit(("t4",), "T4")),
    ("reserve-spared", [A100_EMPTY, T4_NEARLY_FULL], requests(gpu_milli=1000), 0.2,
     Fit(("a100",), "A100")),
    ("reserve-used-if-nothing-else", [T4_NEARLY_FULL], requests(gpu_milli=1000), 0.2,
     Fit(("t4",), "T4")),
    ("share-on-a-partly-used-card", [A100_EMPTY, node("t4", "T4", 4, free_milli=[600, 0, 0, 0])],
     requests(gpu_milli=500), 0.0, Fit(("t4",), "T4")),
    ("share-tighter-bucket-wins", [node("a", "A100", 2, free_milli=[900, 0]),
                                   node("t", "T4", 2, free_milli=[550, 0])],
     requests(gpu_milli=500), 0.0, Fit(("t",), "T4")),
]


@pytest.mark.parametrize(("nodes", "r", "headroom", "wanted"),
                         [c[1:] for c in MODEL_CHOICE], ids=[c[0] for c in MODEL_CHOICE])
def test_one_replica_goes_to_the_tightest_model_outside_the_reserve(
        nodes: list[NodeInfo], r: TaskRequests, headroom: float, wanted: Fit) -> None:
    assert search_with_headroom(nodes, r, headroom) == wanted
