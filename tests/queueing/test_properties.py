"""Property tests of the queueing layer against simple reference models (hypothesis).

The layer is driven directly: a real ``Queueing`` over a real ``FleetView`` (one cluster,
for the DRF denominators), with tasks in memory and placement judged by a free-GPU counter,
so each example runs in microseconds and only the queueing rules are under test.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from fuyao.spec import ClusterState, TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.fleet import FleetView
from hub.placement.profile import DEFAULT_PROFILE
from hub.placement.result import FitError, PlacementResult
from hub.queueing import Queueing
from hub.queueing.quota import QueueState
from hub.store import QueueRecord
from hub.taskbook import TaskBook
from tests.hub.agentkit import gpu_node

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GPU = 1000


class Model:
    """One cluster of ``nodes`` x 8 GPUs; tasks of one GPU each; a real Queueing in front."""

    def __init__(self, nodes: int, queues: list[QueueState]) -> None:
        fleet = FleetView()
        fleet.upsert_cluster("c", labels={}, weight=1, headroom=0.0, state=ClusterState.READY)
        fleet.replace_nodes("c", [gpu_node(f"n{i}", "NVIDIA-A100-SXM4-80GB", 8)
                                  for i in range(nodes)])
        self.gpus = nodes * 8
        self.book = TaskBook(writer=None, fleet=fleet)   # type: ignore[arg-type]
        self.q = Queueing(self.book, fleet, DEFAULT_PROFILE, headroom_priority=10**9)
        for state in [QueueState("default"), *queues]:
            self.q.book.states[state.name] = state
            self.q.book.records[state.name] = QueueRecord(state.name)
        self.seq = itertools.count(1)
        self.borrowed_at: list[int] = []   # fleet use right after each borrowing admission

    def submit(self, queue: str, count: int, priority: int = 0, **spec: Any) -> None:
        for _ in range(count):
            seq = next(self.seq)
            name = f"{queue}-{seq}"
            task = ActiveTask(id=name, name=name, spec=TaskSpec(name=name, gpu=1, queue=queue,
                                                                **spec),
                              state=TaskState.QUEUED, queue=queue, priority=priority, seq=seq,
                              created_at=NOW, updated_at=NOW)
            self.book.active[name] = task

    def running(self, queue: str | None = None) -> list[ActiveTask]:
        return [t for t in self.book.active.values() if t.state == TaskState.RUNNING
                and (queue is None or t.queue == queue)]

    def cycle(self) -> list[ActiveTask]:
        free = self.gpus - len(self.running())
        cycle = self.q.begin(self.book.queued())
        placed = []
        for task in cycle:
            request = cycle.request(task)
            if request is None:
                continue
            if free >= 1:
                result = PlacementResult("c", ("n0",), None, "A100")
                if not cycle.admit(task, result):
                    continue
                free -= 1
                task.state, task.cluster = TaskState.RUNNING, "c"
                cycle.placed(task, result)
                placed.append(task)
                limit = self.q.book.states[task.queue].limits.get("gpu")
                if limit is not None and len(self.running(task.queue)) * GPU > limit:
                    self.borrowed_at.append(len(self.running()) * GPU)
            else:
                cycle.missed(task, request, PlacementResult(None, (), FitError(1, ())))
        self.q.finish(cycle)
        return placed

    def finish(self, tasks: list[ActiveTask]) -> None:
        for task in tasks:
            del self.book.active[task.id]


weights = st.lists(st.integers(1, 5), min_size=2, max_size=4)


@settings(max_examples=60, deadline=None)
@given(weights=weights, nodes=st.integers(1, 6), rounds=st.integers(0, 6),
       churn=st.integers(1, 8))
def test_drf_matches_water_filling_and_converges_to_the_weights(
        weights: list[int], nodes: int, rounds: int, churn: int) -> None:
    queues = [QueueState(f"q{i}", weight=w) for i, w in enumerate(weights)]
    m = Model(nodes, queues)
    for q in queues:
        m.submit(q.name, m.gpus * (rounds + 3))      # every queue wants the whole fleet, always
    for _ in range(rounds + 1):
        used = {q.name: len(m.running(q.name)) for q in queues}
        want = dict(used)
        for _ in range(m.gpus - sum(used.values())):   # reference: water-filling by weight
            pick = min(queues, key=lambda q: (want[q.name] / m.gpus / q.weight, q.name))
            want[pick.name] += 1
        m.cycle()
        assert {q.name: len(m.running(q.name)) for q in queues} == want
        oldest = sorted(m.running(), key=lambda t: t.seq)[:churn]   # equal-length tasks end
        m.finish(oldest)
    m.cycle()
    total = sum(weights)
    for q in queues:        # converged: within one task of its weighted share
        share = len(m.running(q.name)) / m.gpus
        assert abs(share - q.weight / total) <= (len(queues)) / m.gpus + 1e-9


quota_sets = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 8), st.integers(0, 40)),
                      min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(specs=quota_sets, nodes=st.integers(1, 5), steps=st.integers(1, 5),
       seed=st.randoms(use_true_random=False))
def test_no_queue_exceeds_its_quota_plus_borrow(
        specs: list[tuple[int, int, int]], nodes: int, steps: int, seed: Any) -> None:
    queues = [QueueState(f"q{i}", limits={"gpu": quota * GPU}, borrow={"gpu": borrow * GPU})
              for i, (quota, borrow, _) in enumerate(specs)]
    m = Model(nodes, queues)
    for q, (_, _, demand) in zip(queues, specs, strict=True):
        m.submit(q.name, demand)
    for _ in range(steps):
        m.cycle()
        for q in queues:
            used = len(m.running(q.name)) * GPU
            assert used <= q.limits["gpu"] + q.borrow["gpu"], q
        # Each admission above a quota was covered by idle quota at that moment: no idle
        # quota is lent twice (the cohort's use stays within the sum of its quotas).
        cohort = sum(q.limits["gpu"] for q in queues)
        assert all(in_use <= cohort for in_use in m.borrowed_at)
        m.finish(seed.sample(m.running(), k=len(m.running()) // 2))


running = st.lists(st.tuples(st.sampled_from(["q0", "q1"]), st.integers(-3, 3), st.booleans()),
                   min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(tasks=running, level=st.sampled_from([0, 1]), priority=st.integers(-3, 3),
       q1_quota=st.integers(0, 6))
@example(tasks=[("q1", 0, True), ("q1", 0, True)], level=0, priority=0, q1_quota=0)
def test_preemption_candidates_never_outrank_the_preemptor(
        tasks: list[tuple[str, int, bool]], level: int, priority: int, q1_quota: int) -> None:
    queues = [QueueState("q0", priority=level, limits={"gpu": 4 * GPU}),
              QueueState("q1", limits={"gpu": q1_quota * GPU}, borrow={"gpu": 12 * GPU})]
    m = Model(2, queues)
    for queue, prio, preemptible in tasks:
        m.submit(queue, 1, prio, preemptible=preemptible)
    for task in m.book.active.values():
        task.state, task.cluster, task.node = TaskState.RUNNING, "c", "n0"
    m.submit("q0", 1, priority)
    preemptor = max(m.book.active.values(), key=lambda t: t.seq)
    cycle = m.q.begin(m.book.queued())
    candidates = m.q.preemption.candidates(preemptor, cycle)
    # the lowest evictable rank given spares the scan, and finds the same
    lowest = m.q.preemption.lowest_rank(cycle)
    assert (lowest is None and not candidates) or (
        lowest is not None and m.q.preemption.candidates(preemptor, cycle, lowest) == candidates)
    rank = cycle.rank(preemptor)
    for victim in candidates.get("c", []):
        assert victim.spec.preemptible
        assert cycle.rank(victim) <= rank
        if cycle.rank(victim) == rank:     # equal rank: only to take back borrowed quota
            assert victim.queue == "q1" and len(m.running("q1")) > q1_quota
