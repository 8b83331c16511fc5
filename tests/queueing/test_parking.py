"""Parking (``hub.queueing.parking``): a task no cluster could take even empty is set aside,
and only such a task, for only as long as the fleet's offer stands.

The property runs the real engine: over generated fleets (models, card counts, cpu, labels,
schedulability, cluster states, cordons and taints), with generated use and hub holds on
them, a parked task is one the scheduler misses on the live fleet with no cluster excluded -
and stays so through any generated sequence of fleet changes for as long as it stays parked
(a change that could let it fit returns it to the cycle). The cycle tests run a real
in-process hub: tasks nothing can run no longer cost a decision each cycle, do not hold
their queue, and are placed once a cluster that can take them joins.
"""

from __future__ import annotations

import contextlib
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuyao.errors import FuyaoError
from fuyao.inventory import NodeInfo
from fuyao.spec import ClusterState, TaskSpec, TaskState
from fuyao.taints import Taint, Toleration
from hub.activetask import ActiveTask
from hub.fleet import FleetView
from hub.placement.profile import DEFAULT_PROFILE
from hub.placement.scheduler import Scheduler
from hub.queueing.parking import Parking
from hub.queueing.preempt import Planner
from hub.taskindex import ActiveTasks
from tests.placement.builders import node
from tests.queueing.conftest import add_cluster, placed, quiet_harness, submit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MODELS = ["A100", "T4", "H100"]
_IDS = itertools.count(1)

nodes = st.builds(
    lambda model, gpus, cpu, zone, off, used: (model, gpus, cpu, zone, off, used),
    st.sampled_from([*MODELS, None]), st.integers(0, 8), st.sampled_from([8, 32, 64]),
    st.sampled_from(["a", "b"]), st.booleans(), st.integers(0, 8))
clusters = st.lists(
    st.tuples(st.lists(nodes, min_size=0, max_size=4),
              st.sampled_from([ClusterState.READY, ClusterState.READY, ClusterState.NOT_READY]),
              st.booleans(), st.booleans()),
    min_size=1, max_size=3)
specs = st.fixed_dictionaries({
    "gpu": st.sampled_from([0, 1, 1, 2, 4, 8, 12]),
    "gpu_model": st.sampled_from([*MODELS, "B200", None]),
    "cpu": st.sampled_from(["1", "1", "16", "48", "100"]),
    "selector": st.sampled_from([None, None, "zone=a", "zone=b", "zone=c",
                                 "nvidia.com/gfd.timestamp=3", "kubernetes.io/hostname=c0-n0"]),
    "tolerate": st.booleans(),
    "priority": st.integers(-1, 1),
})
changes = st.lists(st.tuples(
    st.sampled_from(["use", "hold", "release", "grow", "shrink", "new-node", "drop-node",
                     "gfd", "state", "cordon", "untaint", "join"]),
    st.integers(0, 2), st.integers(0, 8)), max_size=8)


def _node(name: str, spec: tuple[Any, ...], used: int | None = None,
          stamp: int = 0) -> NodeInfo:
    """A node of ``spec``; ``stamp``: its GPU feature discovery timestamp (per-node key)."""
    model, gpus, cpu, zone, off, default_used = spec
    busy = default_used if used is None else used
    frees = [0 if i < busy else 1000 for i in range(gpus)] if model else []
    return node(name, model, gpus if model else 0, cpu=cpu, free_cpu=max(0, cpu - busy),
                free_milli=frees or None, unschedulable=off,
                labels={"zone": zone, "nvidia.com/gfd.timestamp": str(stamp)})


def _fleet(shape: list[tuple[Any, ...]]) -> FleetView:
    fleet = FleetView()
    for i, (members, state, cordoned, tainted) in enumerate(shape):
        name = f"c{i}"
        fleet.upsert_cluster(name, labels={}, weight=1, headroom=0.0, state=state,
                             cordoned=cordoned,
                             taints=(Taint(key="dedicated", value="x"),) if tainted else ())
        fleet.replace_nodes(name, [_node(f"{name}-n{j}", n) for j, n in enumerate(members)])
    return fleet


def _task(spec: dict[str, Any], shelf: ActiveTasks) -> ActiveTask:
    """A Queued task of ``spec``, put in the task map ``shelf`` (where parking sets it aside)."""
    fields = {k: v for k, v in spec.items() if k not in ("tolerate", "priority")}
    if spec["tolerate"]:
        fields["tolerations"] = [Toleration(key="dedicated", value="x")]
    tid = f"t{next(_IDS)}"
    shelf[tid] = task = ActiveTask(
        id=tid, name=tid, spec=TaskSpec(name=tid, **fields), state=TaskState.QUEUED,
        queue="default", priority=spec["priority"], seq=1, created_at=NOW, updated_at=NOW)
    return task


def _parking(fleet: FleetView) -> tuple[Parking, ActiveTasks]:
    """Parking over ``fleet``, and the task map it sets parked tasks aside in."""
    planner = Planner(fleet, DEFAULT_PROFILE, 10**9, {})
    shelf = ActiveTasks()
    return Parking(fleet, planner.fits_empty, shelf), shelf


def per_node(task: ActiveTask) -> bool:
    """Does its node selector name a per-node key (never parked)?"""
    return any(r.key in ("nvidia.com/gfd.timestamp", "kubernetes.io/hostname")
               for r in task.request().selector.requirements)


def _misses(fleet: FleetView, task: ActiveTask) -> bool:
    """The live engine's answer, with nothing excluded: no cluster takes the task now."""
    return Scheduler(fleet, DEFAULT_PROFILE, headroom_priority=10**9,
                     cache=False).schedule(task.request()).cluster is None


def _change(fleet: FleetView, shape: list[tuple[Any, ...]], kind: str, which: int,
            amount: int) -> None:
    """One fleet change of ``kind`` on cluster ``which`` (mod the cluster count)."""
    name = f"c{which % len(shape)}"
    c = fleet.cluster(name)
    assert c is not None
    states = c.nodes()
    if kind in ("use", "gfd") and states:
        members = shape[which % len(shape)][0]
        j = amount % len(states)
        if j < len(members):
            fleet.apply_delta(name, [_node(f"{name}-n{j}", members[j], used=amount)
                                     if kind == "use" else
                                     _node(f"{name}-n{j}", members[j], stamp=amount)], [])
    elif kind == "hold" and states:
        with contextlib.suppress(FuyaoError):   # no room for the hold: nothing changes
            fleet.reserve(name, f"h{amount}", TaskSpec(name="h", cpu="1").requests(),
                          [states[amount % len(states)].name])
    elif kind == "release":
        fleet.release(f"h{amount}")
    elif kind in ("grow", "shrink", "new-node"):
        gpus = 8 if kind == "grow" else 1
        model = MODELS[amount % len(MODELS)]
        spec = (model, gpus, 64 if kind == "grow" else 8, "ab"[amount % 2], False, 0)
        index = len(states) if kind == "new-node" else 0
        fleet.apply_delta(name, [_node(f"{name}-n{index}", spec)], [])
    elif kind == "drop-node" and states:
        fleet.apply_delta(name, [], [states[amount % len(states)].name])
    elif kind == "state":
        fleet.set_state(name, ClusterState.READY if amount % 2 else ClusterState.NOT_READY)
    elif kind == "cordon":
        fleet.set_cordoned(name, bool(amount % 2))
    elif kind == "untaint":
        fleet.upsert_cluster(name, labels=dict(c.labels), weight=c.weight, headroom=c.headroom,
                             state=c.state, cordoned=c.cordoned, taints=())
    elif kind == "join":
        joined = f"j{amount}"
        fleet.upsert_cluster(joined, labels={}, weight=1, headroom=0.0,
                             state=ClusterState.READY)
        fleet.replace_nodes(joined, [_node(f"{joined}-n0", (MODELS[amount % 3], 8, 64,
                                                            "ab"[amount % 2], False, 0))])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=clusters, asked=st.lists(specs, min_size=1, max_size=4), steps=changes)
def test_a_parked_task_is_one_the_engine_misses_for_as_long_as_it_stays_parked(
        shape: list[tuple[Any, ...]], asked: list[dict[str, Any]],
        steps: list[tuple[str, int, int]]) -> None:
    fleet = _fleet(shape)
    parking, shelf = _parking(fleet)
    tasks = [_task(spec, shelf) for spec in asked]
    for task in tasks:
        if parking.consider(task):
            assert _misses(fleet, task)
        elif not per_node(task):   # not parked: some cluster would take it empty
            assert any(Planner(fleet, DEFAULT_PROFILE, 10**9, {}).fits_empty(c, task.request())
                       for c in fleet.ordered)
    parking.flush()     # the end of a cycle: parked tasks leave the lanes
    assert _in_lanes(shelf) == {t.id for t in tasks if not parking.parked(t)}
    for kind, which, amount in steps:
        _change(fleet, shape, kind, which, amount)
        for task in tasks:
            if parking.parked(task):
                assert _misses(fleet, task), (kind, which, amount)
    parking.refresh()   # the start of the next cycle
    assert _in_lanes(shelf) == {t.id for t in tasks if not parking.parked(t)}
    assert [t for t in tasks if not parking.parked(t)] == parking.waiting(tasks)


def _in_lanes(shelf: ActiveTasks) -> set[str]:
    return {t.id for lane in shelf.lanes().values() for t in lane}


def test_parked_until_a_node_that_could_take_it_joins_then_waiting_again() -> None:
    fleet = _fleet([([("A100", 4, 64, "a", False, 0)], ClusterState.READY, False, False)])
    parking, shelf = _parking(fleet)
    b200 = _task({"gpu": 1, "gpu_model": "B200", "cpu": "1", "selector": None,
                  "tolerate": False, "priority": 0}, shelf)
    a100 = _task({"gpu": 1, "gpu_model": "A100", "cpu": "1", "selector": None,
                  "tolerate": False, "priority": 0}, shelf)
    assert parking.consider(b200) and not parking.consider(a100)
    assert list(parking.waiting([b200, a100])) == [a100]
    fleet.reserve("c0", "x", TaskSpec(name="x", cpu="1").requests(), ["c0-n0"])  # use: stays
    assert parking.parked(b200)
    fleet.apply_delta("c0", [node("c0-n1", "B200", 8)], [])
    assert not parking.parked(b200)
    assert list(parking.waiting([b200, a100])) == [b200, a100]


def test_a_cluster_not_ready_cordoned_or_tainted_parks_it_until_its_settings_change() -> None:
    fleet = _fleet([([("A100", 4, 64, "a", False, 0)], ClusterState.NOT_READY, True, True)])
    parking, shelf = _parking(fleet)
    a100 = _task({"gpu": 1, "gpu_model": "A100", "cpu": "1", "selector": None,
                  "tolerate": False, "priority": 0}, shelf)
    for settle in (lambda: fleet.set_state("c0", ClusterState.READY),
                   lambda: fleet.set_cordoned("c0", False),
                   lambda: fleet.upsert_cluster("c0", labels={}, weight=1, headroom=0.0,
                                                state=ClusterState.READY, taints=())):
        assert parking.consider(a100) and _misses(fleet, a100)
        settle()
        assert not parking.parked(a100)
    assert not parking.consider(a100) and not _misses(fleet, a100)


def test_more_cards_than_any_node_is_parked_until_a_node_grows() -> None:
    fleet = _fleet([([("A100", 4, 64, "a", False, 0)], ClusterState.READY, False, False)])
    parking, shelf = _parking(fleet)
    eight = _task({"gpu": 8, "gpu_model": "A100", "cpu": "1", "selector": None,
                   "tolerate": False, "priority": 0}, shelf)
    assert parking.consider(eight)
    fleet.apply_delta("c0", [_node("c0-n0", ("A100", 4, 64, "a", False, 2))], [])
    assert parking.parked(eight)              # its use changed, not what it offers
    fleet.apply_delta("c0", [_node("c0-n0", ("A100", 8, 64, "a", False, 2))], [])
    assert not parking.parked(eight)
    assert not parking.consider(eight)


def test_a_gfd_timestamp_moves_no_capacity_and_a_selector_on_one_is_never_parked() -> None:
    fleet = _fleet([([("A100", 4, 64, "a", False, 0)], ClusterState.READY, False, False)])
    parking, shelf = _parking(fleet)
    b200 = _task({"gpu": 1, "gpu_model": "B200", "cpu": "1", "selector": None,
                  "tolerate": False, "priority": 0}, shelf)
    pinned = _task({"gpu": 1, "gpu_model": "A100", "cpu": "1",
                    "selector": "nvidia.com/gfd.timestamp=7", "tolerate": False,
                    "priority": 0}, shelf)
    assert parking.consider(b200) and _misses(fleet, pinned)
    assert not parking.consider(pinned)       # its node's next timestamp could match
    fleet.apply_delta("c0", [_node("c0-n0", ("A100", 4, 64, "a", False, 0), stamp=7)], [])
    assert parking.parked(b200) and not _misses(fleet, pinned)


def test_memory_shares_and_divisible_tasks_are_never_parked() -> None:
    fleet = _fleet([([("T4", 1, 8, "a", False, 0)], ClusterState.READY, False, False)])
    parking, shelf = _parking(fleet)
    shares = _task({"gpu": 0, "gpu_model": None, "cpu": "1", "selector": "zone=c",
                    "tolerate": False, "priority": 0}, shelf)
    shares.spec = shares.spec.model_copy(update={"gpu_mem": "200Gi"})
    split = ActiveTask(id="s", name="s", spec=TaskSpec(name="s", gpu=1, gpu_model="B200",
                                                       replicas=4),
                       state=TaskState.QUEUED, queue="default", priority=0, seq=2,
                       created_at=NOW, updated_at=NOW)
    assert not parking.consider(shares) and not parking.consider(split)


def _engine_decisions(h: Any) -> int:
    return int(h.hub.placement.misses.decided + h.hub.placement.misses.answered)


async def test_tasks_nothing_can_run_are_not_decided_again_and_run_once_a_cluster_can(
        tmp_path: Path) -> None:
    async with quiet_harness(tmp_path / "hub") as h:
        add_cluster(h, "east", nodes=1, gpus=4)
        await submit(h, *({"name": f"never{i}", "gpu": 1, "gpu_model": "B200"}
                          for i in range(50)))
        await submit(h, *({"name": f"run{i}", "gpu": 1} for i in range(2)))
        await h.hub.placement.cycle()
        assert set(placed(h)) == {"run0", "run1"}    # the B200 head held nothing back
        assert len(h.hub.queueing.parking) == 50
        before = _engine_decisions(h)
        await submit(h, *({"name": f"late{i}", "gpu": 1} for i in range(2)))
        await h.hub.placement.cycle()
        assert set(placed(h)) == {"run0", "run1", "late0", "late1"}
        assert _engine_decisions(h) - before == 2      # the parked ones were not asked again
        view = (await h.api.get("/api/v1/tasks/never0")).json()
        assert view["state"] == "Queued" and "B200" in view["message"]
        assert view["held_by"].startswith("parked: no cluster could take it")
        assert b"fuyao_tasks_parked 50.0" in h.hub.metrics.render()
        add_cluster(h, "west", nodes=2, gpus=8, product="NVIDIA-B200")
        await h.hub.placement.cycle()
        assert {f"never{i}" for i in range(16)} <= set(placed(h))
        assert len(h.hub.queueing.parking) == 0
        assert b"fuyao_tasks_parked 0.0" in h.hub.metrics.render()
