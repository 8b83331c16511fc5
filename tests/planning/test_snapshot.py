"""The planning copy shares the live node states: it must answer exactly as the copy rebuilt
from every node's report (``rebuilt_fleet``, what planning copied before) - fit, N-1, the
report - on fleets with tasks placed, reports changed and reservations given back, and
file its index in the same order (the scheduler takes the first node found)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.capacity import ClusterLoss, FitRequest
from fuyao.inventory import NodeInfo
from fuyao.spec import TaskSpec, TaskState
from fuyao.taints import Taint
from hub.activetask import ActiveTask
from hub.fleet import ClusterInfo, FleetView
from hub.placement import DEFAULT_PROFILE, Scheduler
from hub.planning import failover
from hub.planning.planner import Planner
from hub.planning.snapshot import copy_fleet, rebuilt_fleet
from tests.placement.builders import fleet_of, node

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = [(None, 0), ("H100", 8), ("H100", 4), ("T4", 4)]
SHARES = st.sampled_from([0, 250, 500, 1000, 1000, 1000, 1500])   # 1500: out of range
NODE = st.tuples(st.sampled_from(KINDS), st.lists(SHARES, min_size=8, max_size=8),
                 st.sampled_from([4, 16, 64]), st.sampled_from(["a", "b"]), st.booleans())
SPECS = [TaskSpec(name="one", gpu=1), TaskSpec(name="half", gpu="500m"),
         TaskSpec(name="two", gpu=2, replicas=2), TaskSpec(name="cpu", cpu=8),
         TaskSpec(name="t4", gpu=1, gpu_model="T4")]
Questions = Callable[[Planner], object]
QUESTIONS: dict[str, Questions] = {
    **{f"fit {s.name}": (lambda p, s=s: p.fit(FitRequest(**_shape(s), limit=40)))  # type: ignore[misc]
       for s in SPECS},
    "n-1": lambda p: p.n_minus_one(),
    **{f"report {by}": (lambda p, by=by: p.report(by))  # type: ignore[misc]
       for by in ("cluster", "model", "site", "queue")},
}


def _shape(spec: TaskSpec) -> dict[str, object]:
    return spec.model_dump(include={"gpu", "gpu_model", "cpu", "replicas"}, exclude_none=True)


def _node(name: str, drawn: tuple[tuple[str | None, int], list[int], int, str, bool]) -> NodeInfo:
    (model, gpus), frees, cpu, zone, off = drawn
    return node(name, model, gpus, free_milli=frees[:gpus], free_cpu=cpu,
                labels={"zone": zone}, unschedulable=off and not gpus)


def build(clusters: list[list[tuple]], tasks: list[int], freed: list[int],  # type: ignore[type-arg]
          changed: list[int]) -> Planner:
    """Clusters whose nodes came in an order other than by name, tasks placed (reserved) by
    the scheduler, some given back, some nodes reported again after (holds on new reports),
    one node gone; the placed tasks are active (the planner reads them), one more queued."""
    fleet = fleet_of({f"c{i}": [_node(f"c{i}n{(7 * j) % 10}", n) for j, n in enumerate(nodes)]
                      for i, nodes in enumerate(clusters)}, headroom=0.1)
    scheduler = Scheduler(fleet, DEFAULT_PROFILE)
    active: dict[str, ActiveTask] = {}
    for seq, pick in enumerate(tasks):
        spec = SPECS[pick % len(SPECS)]
        task = ActiveTask(id=f"t{seq}", name=f"t{seq}", spec=spec, state=TaskState.QUEUED,
                          queue=f"q{seq % 2}", priority=seq % 3, seq=seq, created_at=NOW,
                          updated_at=NOW)
        result = scheduler.schedule(task.request())
        if result.cluster is not None and scheduler.reserve(task.request(), result).ok:
            task.state, task.cluster, task.node = TaskState.PLACED, result.cluster, result.nodes[0]
            active[task.id] = task
    for k in freed:
        fleet.release(f"t{k}")
        active.pop(f"t{k}", None)
    for i, cluster in enumerate(fleet.clusters()):
        nodes = cluster.nodes()
        again = [_node(n.name, ((n.primary, len(n.dev_free)), [500] * 8, 32, "b", False))
                 if n.dev_free else n.info for k, n in enumerate(nodes) if k in changed]
        fleet.apply_delta(cluster.name, again,
                          [nodes[-1].name] if i == 0 and len(nodes) > 1 else [])
    queued = ActiveTask(id="q", name="q", spec=SPECS[0], state=TaskState.QUEUED, queue="q0",
                        priority=0, seq=len(tasks), created_at=NOW, updated_at=NOW)
    active[queued.id] = queued
    return Planner(fleet, DEFAULT_PROFILE, active)


def layout(cluster: ClusterInfo) -> list[object]:
    """The cluster's index as the scheduler walks it: groups, buckets, each in order."""
    return [(g.key, [list(b) for b in g.cpu_buckets],
             [(cls, [list(b) for b in i.full], [list(b) for b in i.partial])
              for cls, i in g.classes.items()]) for g in cluster._groups.values()]


def answers(live: Planner, copy: Callable[[FleetView], FleetView]) -> dict[str, object]:
    """Every question on its own copy, spent by it as the REST answers spend theirs."""
    return {name: ask(live._on(copy(live.fleet), spend=True)) for name, ask in QUESTIONS.items()}


CLUSTERS = st.lists(st.lists(NODE, min_size=1, max_size=6), min_size=1, max_size=3)
INDEXES = st.lists(st.integers(0, 11), max_size=5)


@given(CLUSTERS, st.lists(st.integers(0, 20), max_size=12), INDEXES, INDEXES)
@settings(max_examples=80, deadline=None)
def test_the_shared_copy_answers_as_the_rebuilt_copy(
        clusters: list[list[tuple]], tasks: list[int], freed: list[int],  # type: ignore[type-arg]
        changed: list[int]) -> None:
    live = build(clusters, tasks, freed, changed)
    shared, rebuilt = copy_fleet(live.fleet), rebuilt_fleet(live.fleet)
    for name in [c.name for c in live.fleet.clusters()]:
        a, b = shared.cluster(name), rebuilt.cluster(name)
        assert a is not None and b is not None
        assert layout(a) == layout(b)
        assert [vars_of(n) for n in a.nodes()] == [vars_of(n) for n in b.nodes()]
    assert shared.capacity() == rebuilt.capacity()
    assert answers(live, copy_fleet) == answers(live, rebuilt_fleet)


def vars_of(state: object) -> dict[str, object]:
    """A node state's effective amounts and devices (what placement reads)."""
    return {k: getattr(state, k) for k in ("name", "cpu", "mem", "pods", "schedulable",
                                           "primary", "dev_free")}


def test_a_tainted_cluster_counts_in_an_answer_only_for_tasks_that_tolerate_it() -> None:
    """The copy keeps each cluster's taints: ``fuyaoctl capacity fit`` and N-1 must not
    count room in a ``NoSchedule`` cluster the scheduler would never place the task on."""
    live = build([[(("H100", 8), [1000] * 8, 64, "a", False)]] * 2, [], [], [])
    one = live._on(copy_fleet(live.fleet), spend=True).fit(FitRequest(gpu=1)).total
    c1 = live.fleet.cluster("c1")
    assert c1 is not None
    live.fleet.upsert_cluster("c1", labels=c1.labels, weight=c1.weight, headroom=c1.headroom,
                              state=c1.state, taints=(Taint(key="maintenance"),))
    copy = copy_fleet(live.fleet)
    assert copy.cluster("c1").taints == (Taint(key="maintenance"),)  # type: ignore[union-attr]
    assert live._on(copy, spend=True).fit(FitRequest(gpu=1)).total == one // 2


def test_the_copy_leaves_the_live_view_and_its_node_states_alone() -> None:
    live = build([[(("H100", 8), [1000] * 8, 64, "a", False)] * 3], [0, 0, 2], [], [])
    before = {n.name: n for n in live.fleet.cluster("c0").nodes()}  # type: ignore[union-attr]
    frees = {name: n.dev_free for name, n in before.items()}
    capacity = live.fleet.capacity()
    spent = live._on(copy_fleet(live.fleet), spend=True)
    assert spent.fit(FitRequest(gpu=1)).total > 0
    after = {n.name: n for n in live.fleet.cluster("c0").nodes()}  # type: ignore[union-attr]
    assert all(after[name] is state for name, state in before.items())
    assert {name: n.dev_free for name, n in after.items()} == frees
    assert live.fleet.capacity() == capacity


@given(CLUSTERS, st.lists(st.integers(0, 20), max_size=12), INDEXES, INDEXES)
@settings(max_examples=60, deadline=None)
def test_one_scheduler_judges_every_lost_cluster_as_a_fresh_one_would(
        clusters: list[list[tuple]], tasks: list[int], freed: list[int],  # type: ignore[type-arg]
        changed: list[int]) -> None:
    """N-1 re-places each lost cluster's tasks with one scheduler, whose caches follow the
    reservations made and given back: the verdicts are those of a new scheduler per lost
    cluster (what N-1 did before)."""
    live = build(clusters, tasks, freed, changed)
    one = live._on(copy_fleet(live.fleet), spend=True).n_minus_one()
    real = failover._lose

    def fresh(copy: FleetView, _: Scheduler, lost: str, running: Sequence[failover.Running],
              room: failover.Room) -> ClusterLoss:
        return real(copy, Scheduler(copy, DEFAULT_PROFILE), lost, running, failover.Room())

    with patch.object(failover, "_lose", fresh):
        each = live._on(copy_fleet(live.fleet), spend=True).n_minus_one()
    assert one == each


def test_a_spent_copy_is_freed_without_the_cyclic_collector() -> None:
    """The REST answers pause the collector while they think; the copy they spend must go
    by reference counting once cleared (the schedulers' tables list themselves: ``forget``)."""
    live = build([[(("H100", 8), [1000] * 8, 64, "a", False)] * 3] * 2, [0, 1, 2], [], [])
    gc.collect()
    gc.disable()
    try:
        for ask in (lambda p: p.fit(FitRequest(gpu=1)), lambda p: p.report()):
            spent = live._on(copy_fleet(live.fleet), spend=True)
            ask(spent)
            spent.fleet.clear()
            del spent
            assert gc.collect() == 0
    finally:
        gc.enable()
