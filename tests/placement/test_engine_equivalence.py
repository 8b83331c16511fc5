"""Property: the scheduler with its caches decides exactly as without them, for all inputs.

The cached engine (verdict tables per request shape, fit searches kept per cluster) is the
one the hub runs; ``Scheduler(..., cache=False)`` judges every cluster afresh and is the
reference. Hypothesis draws a fleet, then a program of steps - decisions (kept as
reservations or not), releases, node reports, nodes leaving, cordons, health changes,
settings and taint changes - and after every step both engines must give the same
cluster, nodes, model, per-cluster reasons, scores and error message, in every profile
whose choice is deterministic. Every other cached result is read only after the whole
program ran: what a result says must not change when the engine's tables move on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState
from fuyao.taints import Taint, Toleration
from hub.fleet import FleetView
from hub.placement import PlacementRequest, PlacementResult, Scheduler
from hub.placement.profile import TIGHTEST
from hub.placement.profiles import PROFILES

from .builders import node, requests

CLUSTERS = ("c0", "c1", "c2", "c3")
MODELS = (None, "T4", "V100", "A100", "H100")
SELECTORS = ("", "gpu-model>=A100", "gpu-model=T4", "zone=y", "zone in (x, y), tier!=low",
             "kubernetes.io/hostname=c1-n2")
CLUSTER_SELECTORS = (None, "region=east", "region!=west")
DETERMINISTIC = ("default", "fgd", "dynamic-weight", "tightest")   # random/static-weight:
# they draw at random; "tightest": the default with model_choice tightest, whose one-replica
# fits the cache re-checks node by node (hub.fleet.certify)
CHOICES = {**PROFILES, "tightest": replace(PROFILES["default"], model_choice=TIGHTEST)}

node_specs = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "gpus": st.integers(1, 8),
    "cpu": st.sampled_from([8, 16, 64]),
    "free_cpu": st.sampled_from([None, 2, 6]),
    "free_memory_gib": st.sampled_from([None, 8, 64]),
    "free_pods": st.sampled_from([None, None, 0]),
    "busy": st.lists(st.sampled_from([0, 250, 500, 1000, 1000]), min_size=8, max_size=8),
    "zone": st.sampled_from(["x", "y"]),
    "tier": st.sampled_from(["low", "high"]),
    "unschedulable": st.sampled_from([False, False, False, True]),
})

request_specs = st.fixed_dictionaries({
    "selector": st.sampled_from(SELECTORS),
    "shape": st.sampled_from([
        {"gpu_milli": 1000}, {"gpu_milli": 2000, "replicas": 2}, {"gpu_milli": 250},
        {"gpu_milli": 500, "gpu_memory_gib": 30}, {"cpu": 2}, {"cpu": 4, "replicas": 3},
        {"cpu": 1, "memory_gib": 48}, {"gpu_milli": 8000},
    ]),
    "priority": st.sampled_from([0, 0, 0, 2000]),
    "failover": st.booleans(),
    "exclude": st.lists(st.sampled_from(CLUSTERS), max_size=2),
    "cluster_selector": st.sampled_from(CLUSTER_SELECTORS),
    "prefer": st.booleans(),
    "tolerate": st.booleans(),
})

place_steps = st.tuples(st.just("place"), st.integers(0, 2), st.booleans())
steps = st.one_of(
    place_steps, place_steps, place_steps,
    st.tuples(st.just("usage"), st.sampled_from(CLUSTERS), st.integers(0, 5),
              st.lists(st.sampled_from([0, 250, 500, 1000]), min_size=8, max_size=8),
              st.sampled_from([None, 2, 6])),
    st.tuples(st.just("release"), st.integers(0, 50)),
    st.tuples(st.just("report"), st.sampled_from(CLUSTERS), st.integers(0, 5), node_specs),
    st.tuples(st.just("drop"), st.sampled_from(CLUSTERS), st.integers(0, 5)),
    st.tuples(st.just("cordon"), st.sampled_from(CLUSTERS), st.booleans()),
    st.tuples(st.just("health"), st.sampled_from(CLUSTERS),
              st.sampled_from([ClusterState.READY, ClusterState.READY,
                               ClusterState.NOT_READY])),
    st.tuples(st.just("settings"), st.sampled_from(CLUSTERS), st.integers(0, 3),
              st.sampled_from([0.0, 0.1, 0.3]), st.sampled_from(["east", "west"]),
              st.booleans()),
)


def make_node(cluster: str, index: int, spec: dict[str, Any]) -> NodeInfo:
    name = f"{cluster}-n{index}"
    model = spec["model"]
    gpus = spec["gpus"] if model else 0
    return node(name, model, gpus, cpu=spec["cpu"], free_cpu=spec["free_cpu"],
                free_memory_gib=spec["free_memory_gib"], free_pods=spec["free_pods"],
                free_milli=spec["busy"][:gpus],
                labels={"zone": spec["zone"], "tier": spec["tier"]},
                unschedulable=spec["unschedulable"])


def make_request(step: int, spec: dict[str, Any]) -> PlacementRequest:
    wanted = spec["cluster_selector"]
    return PlacementRequest(
        task_id=f"t{step}", name=f"t{step}", requests=requests(**spec["shape"]),
        selector=parse_selector(spec["selector"]), priority=spec["priority"],
        failover=spec["failover"], exclude=frozenset(spec["exclude"]),
        cluster_selector=None if wanted is None else parse_selector(wanted),
        cluster_preference=((parse_selector("region=east"), 50),) if spec["prefer"] else (),
        tolerations=(Toleration(key="maintenance", operator="Exists"),)
        if spec["tolerate"] else (),
    )


def answer(result: PlacementResult) -> tuple[object, ...]:
    """Everything a user sees of a decision."""
    error = result.error
    return (result.cluster, result.nodes, result.model, result.reasons, result.scores,
            error.message if error else None, error.nearest_fit if error else None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet_nodes=st.lists(st.lists(node_specs, min_size=1, max_size=5), min_size=4,
                            max_size=4),
       shapes=st.lists(request_specs, min_size=3, max_size=3),
       program=st.lists(steps, min_size=30, max_size=120),
       profile=st.sampled_from(DETERMINISTIC))
def test_the_cached_engine_decides_as_the_uncached_one(
    fleet_nodes: list[list[dict[str, Any]]], shapes: list[dict[str, Any]],
    program: list[tuple[Any, ...]], profile: str,
) -> None:
    fleet = FleetView()
    specs: dict[tuple[str, int], dict[str, Any]] = {}   # what each node last reported
    for name, drawn in zip(CLUSTERS, fleet_nodes, strict=True):
        fleet.upsert_cluster(name, labels={"region": "east"}, weight=1, headroom=0.1,
                             state=ClusterState.READY)
        specs.update({(name, i): s for i, s in enumerate(drawn)})
        fleet.replace_nodes(name, [make_node(name, i, s) for i, s in enumerate(drawn)])
    chosen = CHOICES[profile]
    cached = Scheduler(fleet, chosen, headroom_priority=1000)
    reference = Scheduler(fleet, chosen, headroom_priority=1000, cache=False)
    live: list[str] = []
    read_later: list[tuple[PlacementResult, tuple[object, ...], int]] = []
    for step, (kind, *args) in enumerate(program):
        if kind == "place":   # a few request shapes, asked again and again: caches warm up
            req = make_request(step, shapes[args[0]])
            got = cached.schedule(req)
            if step % 2:
                read_later.append((got, answer(reference.schedule(req)), step))
            else:
                assert answer(got) == answer(reference.schedule(req)), (step, req)
            if got.cluster is not None and args[1]:
                assert cached.reserve(req, got).ok
                live.append(req.task_id)
        elif kind == "release" and live:
            fleet.release(live.pop(args[0] % len(live)))
        elif kind == "report":
            cluster, index, spec = args
            specs[cluster, index] = spec
            fleet.apply_delta(cluster, [make_node(cluster, index, spec)], [])
        elif kind == "usage" and (args[0], args[1]) in specs:   # same node, new free amounts
            cluster, index, busy, free_cpu = args
            spec = specs[cluster, index] = {**specs[cluster, index], "busy": busy,
                                            "free_cpu": free_cpu}
            fleet.apply_delta(cluster, [make_node(cluster, index, spec)], [])
        elif kind == "drop":
            specs.pop((args[0], args[1]), None)
            fleet.apply_delta(args[0], [], [f"{args[0]}-n{args[1]}"])
        elif kind == "cordon":
            fleet.set_cordoned(args[0], args[1])
        elif kind == "health":
            fleet.set_state(args[0], args[1])
        elif kind == "settings":
            cluster, weight, headroom, region, tainted = args
            current = fleet.cluster(cluster)
            assert current is not None
            taints = (Taint(key="maintenance", effect="NoSchedule"),) if tainted else ()
            fleet.upsert_cluster(cluster, labels={"region": region}, weight=weight,
                                 headroom=headroom, state=current.state,
                                 cordoned=current.cordoned, taints=taints)
    for got, wanted, step in read_later:
        assert answer(got) == wanted, step
