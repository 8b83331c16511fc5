"""Each queue's use, kept between cycles by ``hub.queueing.ledger.Ledger``, is always what a
recount from scratch gives: over random sequences of submits, placements (on another cluster
or device model each time), runs, finishes, preemptions and failovers, a cycle's ``begin``
and the queue views see exactly the recount's use, and each admitted task's charge is its
demand now."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.fleet import FleetView
from hub.placement.profile import DEFAULT_PROFILE
from hub.queueing import Queueing
from hub.queueing.ledger import charged, nonzero, recount
from hub.queueing.quota import QueueState
from hub.store import QueueRecord
from hub.taskbook import TaskBook

NOW = datetime(2026, 1, 1, tzinfo=UTC)
QUEUES = ("default", "team-a", "team-b")
CLUSTERS = ("east", "west")
MODELS = (None, "A100", "H100")

step = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from(QUEUES), st.integers(0, 4),
              st.integers(100, 4000)),
    st.tuples(st.just("place"), st.integers(0, 7), st.sampled_from(CLUSTERS),
              st.sampled_from(MODELS)),
    st.tuples(st.sampled_from(["run", "finish", "preempt", "failover", "begin", "view"]),
              st.integers(0, 7)),
)


class Hub:
    """A real ``Queueing`` over tasks in memory; each step does to a task what the hub's
    transition does to it (``TaskBook.stage`` for a placement, ``requeue`` for a
    failover, the eviction's ``uncharge`` then ``requeue`` for a preemption)."""

    def __init__(self) -> None:
        self.book = TaskBook(writer=None, fleet=FleetView())   # type: ignore[arg-type]
        self.q = Queueing(self.book, self.book.fleet, DEFAULT_PROFILE, headroom_priority=1000)
        for name in QUEUES:
            self.q.book.states[name] = QueueState(name)
            self.q.book.records[name] = QueueRecord(name)
        self.made = 0

    def task(self, index: int) -> ActiveTask | None:
        tasks = sorted(self.book.active.values(), key=lambda t: t.seq)
        return tasks[index % len(tasks)] if tasks else None

    def submit(self, queue: str, gpus: int, cpu_milli: int) -> None:
        self.made += 1
        name = f"t{self.made}"
        spec = TaskSpec(name=name, queue=queue, cpu=f"{cpu_milli}m", memory="1Gi", gpu=gpus)
        self.book.active[name] = ActiveTask(id=name, name=name, spec=spec,
                                            state=TaskState.QUEUED, queue=queue, priority=0,
                                            seq=self.made, created_at=NOW, updated_at=NOW)

    def place(self, task: ActiveTask, cluster: str, model: str | None) -> None:
        if task.state != TaskState.QUEUED:
            return
        self.q.models[task.id] = model        # as Cycle.placed records it
        task.state, task.cluster = TaskState.PLACED, cluster
        task.generation += 1

    def act(self, kind: str, task: ActiveTask) -> None:
        if kind == "run" and task.state == TaskState.PLACED:
            task.state = TaskState.RUNNING
        elif kind == "finish":
            del self.book.active[task.id]
        elif kind == "preempt" and charged(task):
            assert task.cluster is not None
            self.q.uncharge(task, task.cluster)
            task.state, task.cluster = TaskState.QUEUED, None
        elif kind == "failover" and task.cluster is not None:
            task.state, task.cluster = TaskState.QUEUED, None

    def check(self, kind: str) -> None:
        want = nonzero(recount(self.book.active, self.q.need_of))
        if kind == "view":
            self.q.views()
            assert nonzero(self.q.ledger.usage) == want
            return
        cycle = self.q.begin(self.book.queued())
        assert nonzero(cycle.usage) == want == nonzero(self.q.ledger.usage)
        for task in self.book.active.values():
            assert self.q.demand_of(task.id) == (self.q.need_of(task) if charged(task)
                                                 else {})


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
def test_the_use_kept_between_cycles_is_always_a_recount_from_scratch(
        steps: list[tuple[object, ...]]) -> None:
    hub = Hub()
    for kind, *args in steps:
        if kind == "submit":
            queue, gpus, cpu = args
            hub.submit(str(queue), int(gpus), int(cpu))     # type: ignore[call-overload]
            continue
        task = hub.task(int(args[0]))                        # type: ignore[call-overload]
        if task is None:
            continue
        if kind == "place":
            hub.place(task, str(args[1]), args[2])           # type: ignore[arg-type]
        elif kind in ("begin", "view"):
            hub.check(str(kind))
        else:
            hub.act(str(kind), task)
    hub.check("begin")


def test_a_preempted_task_stops_counting_at_once_and_is_not_charged_twice() -> None:
    hub = Hub()
    hub.submit("team-a", 2, 1000)
    task = hub.task(0)
    assert task is not None
    hub.place(task, "east", "A100")
    hub.check("begin")
    assert hub.q.usage.of("team-a")["gpu.A100"] == 2000
    hub.q.uncharge(task, "east")
    assert hub.q.usage.of("team-a").get("gpu.A100", 0) == 0     # this cycle's use dropped
    hub.q.uncharge(task, "east")                                # again: nothing more
    assert hub.q.usage.of("team-a").get("gpu", 0) == 0
    task.state, task.cluster = TaskState.QUEUED, None
    hub.check("begin")
    assert nonzero(hub.q.usage) == ({}, {})


def test_a_task_failed_over_and_placed_again_on_the_same_cluster_is_charged_its_new_model(
        ) -> None:
    hub = Hub()
    hub.submit("team-b", 1, 500)
    task = hub.task(0)
    assert task is not None
    hub.place(task, "east", "A100")
    hub.check("begin")
    hub.act("failover", task)
    hub.place(task, "east", "H100")          # before any cycle saw it Queued
    hub.check("begin")
    assert hub.q.usage.of("team-b").get("gpu.A100", 0) == 0
    assert hub.q.usage.of("team-b")["gpu.H100"] == 1000
