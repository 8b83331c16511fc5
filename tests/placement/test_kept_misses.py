"""``Misses``: a kept miss is handed out only while the fleet has not changed, and every
answer is the one the engine gives (``memshare.schedule``, uncached) at that moment."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuyao.selector import parse_selector
from fuyao.spec import ClusterState
from fuyao.taints import Taint
from hub.fleet import FleetView
from hub.placement import PlacementRequest, Scheduler, memshare
from hub.placement.misses import Misses

from .builders import fleet_of, node, requests
from .test_engine_equivalence import (
    CHOICES,
    CLUSTERS,
    DETERMINISTIC,
    answer,
    make_node,
    make_request,
    node_specs,
    request_specs,
)
from .test_engine_equivalence import steps as fleet_steps


def gpu_request(task: str, gpus: int = 1) -> PlacementRequest:
    return PlacementRequest(task_id=task, name=task, requests=requests(gpu_milli=gpus * 1000),
                            selector=parse_selector(""))


def test_a_miss_is_answered_again_until_the_fleet_changes_then_the_task_is_placed() -> None:
    fleet = fleet_of({"c0": [node("c0-0", "A100", 2)], "c1": [node("c1-0", "A100", 1)]})
    scheduler = Scheduler(fleet)
    misses = Misses(fleet)
    for task in ("a", "b", "c"):
        req = gpu_request(task)
        _, result = misses.schedule(scheduler, req)
        assert result.cluster is not None
        assert scheduler.reserve(req, result).ok
    assert misses.decided == 3
    first = misses.schedule(scheduler, gpu_request("d"))[1]
    again = [misses.schedule(scheduler, gpu_request(t)) for t in ("e", "f")]
    assert first.cluster is None and misses.decided == 4 and misses.answered == 2
    assert [(asked.task_id, result) for asked, result in again] == [("e", first), ("f", first)]
    two = misses.schedule(scheduler, gpu_request("g", 2))[1]     # another shape: decided
    assert two.cluster is None and misses.decided == 5
    fleet.release("b")            # room again: the very next task of the shape is placed
    asked, placed = misses.schedule(scheduler, gpu_request("h"))
    assert placed.cluster is not None and asked.task_id == "h" and misses.decided == 6


def test_a_cluster_that_joins_or_changes_state_ends_the_kept_misses() -> None:
    fleet = fleet_of({"c0": [node("c0-0", "A100", 1)]})
    scheduler = Scheduler(fleet)
    misses = Misses(fleet)
    assert misses.schedule(scheduler, gpu_request("a", 2))[1].cluster is None
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0, state=ClusterState.NOT_READY)
    fleet.replace_nodes("c1", [node("c1-0", "A100", 2)])
    assert misses.schedule(scheduler, gpu_request("b", 2))[1].cluster is None
    assert misses.decided == 2
    fleet.set_state("c1", ClusterState.READY)
    assert misses.schedule(scheduler, gpu_request("c", 2))[1].cluster == "c1"


def test_a_memory_sharing_miss_is_answered_with_the_tasks_own_share_request() -> None:
    fleet = fleet_of({"c0": [node("c0-0", "T4", 1, device_gib=16)]})
    scheduler = Scheduler(fleet)
    misses = Misses(fleet)
    base = gpu_request("x")
    wants = replace(requests(), gpu_mem_mib=12 * 1024)
    reqs = [replace(base, task_id=t, name=t, requests=wants) for t in ("a", "b", "c")]
    asked, result = misses.schedule(scheduler, reqs[0])
    assert result.cluster is not None and scheduler.reserve(asked, result).ok
    for req in reqs[1:]:
        got = misses.schedule(scheduler, req)
        assert got[1].cluster is None
        assert got[0] == memshare.schedule(scheduler, req)[0]
        assert got[0].task_id == req.task_id
    assert misses.answered == 1


# shape, times in a row, reserve what fits, other clusters excluded (None: the shape's own)
ask_steps = st.tuples(st.just("ask"), st.integers(0, 2), st.integers(1, 4), st.booleans(),
                      st.sampled_from([None, None, (), ("c0",), ("c1", "c2")]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet_nodes=st.lists(st.lists(node_specs, min_size=1, max_size=4), min_size=4,
                            max_size=4),
       shapes=st.lists(request_specs, min_size=3, max_size=3),
       program=st.lists(st.one_of(ask_steps, fleet_steps), min_size=20, max_size=80),
       profile=st.sampled_from(DETERMINISTIC))
def test_kept_misses_answer_as_the_uncached_engine(
    fleet_nodes: list[list[dict[str, Any]]], shapes: list[dict[str, Any]],
    program: list[tuple[Any, ...]], profile: str,
) -> None:
    fleet = FleetView()
    specs: dict[tuple[str, int], dict[str, Any]] = {}
    for name, drawn in zip(CLUSTERS, fleet_nodes, strict=True):
        fleet.upsert_cluster(name, labels={"region": "east"}, weight=1, headroom=0.1,
                             state=ClusterState.READY)
        specs.update({(name, i): s for i, s in enumerate(drawn)})
        fleet.replace_nodes(name, [make_node(name, i, s) for i, s in enumerate(drawn)])
    chosen = CHOICES[profile]
    cached = Scheduler(fleet, chosen, headroom_priority=1000)
    reference = Scheduler(fleet, chosen, headroom_priority=1000, cache=False)
    misses = Misses(fleet)
    live: list[str] = []
    for step, (kind, *args) in enumerate(program):
        if kind in ("ask", "place"):
            # the same shape asked several times in a row (a queue of like tasks), placing
            # the ones that fit when asked to
            times, keep, exclude = (args[1:4] if kind == "ask" else (1, args[1], None))
            for k in range(times):
                req = make_request(step * 10 + k, shapes[args[0]])
                if exclude is not None:
                    req = replace(req, exclude=frozenset(exclude))
                asked, got = misses.schedule(cached, req)
                want_asked, want = memshare.schedule(reference, req)
                assert (asked, answer(got)) == (want_asked, answer(want)), (step, k)
                if got.cluster is not None and keep:
                    assert cached.reserve(asked, got).ok
                    live.append(asked.task_id)
        elif kind == "release" and live:
            fleet.release(live.pop(args[0] % len(live)))
        elif kind == "report":
            cluster, index, spec = args
            specs[cluster, index] = spec
            fleet.apply_delta(cluster, [make_node(cluster, index, spec)], [])
        elif kind == "usage" and (args[0], args[1]) in specs:
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
