"""The hub's filed map of active tasks answers exactly what a scan of every task would.

``TaskBook`` asks it which tasks are Queued (each placement cycle), which are on a cluster
(failover, reconcile) and which a member reports Unschedulable (spill-over); the queue
ledger reads its change feed; every ``/metrics`` scrape asks how many tasks are in each
state (``fuyao_tasks``). A wrong answer would skip a task or place it twice, or count it
wrong, so the rule is held over random puts, removals and field changes, in any order.
Its placement order of the Queued tasks (``ranked``, kept up as tasks come and go) is held
to sorting them by priority, then ``seq``, the way the placement cycle used to, their
places in their queues (``positions``) to numbering that order queue by queue, and the
cycle's ``lanes`` to that order grouped by queue without the tasks set aside (parked).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, restore, snapshot
from hub.taskindex import ActiveTasks

NOW = datetime(2026, 12, 2, tzinfo=UTC)
CLUSTERS = [None, "c0", "c1"]
STATES = [TaskState.QUEUED, TaskState.PLACED, TaskState.RUNNING, TaskState.SUCCEEDED]


def _task(key: str, priority: int = 0, seq: int = 0) -> ActiveTask:
    return ActiveTask(id=key, name=key, spec=TaskSpec(name=key), state=TaskState.QUEUED,
                      queue="default", priority=priority, seq=seq, created_at=NOW,
                      updated_at=NOW)


rank = st.tuples(st.integers(-1, 1), st.integers(0, 3))    # (priority, seq): ties too
step = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 9), rank),
    st.tuples(st.just("replace"), st.integers(0, 9), rank),
    st.tuples(st.just("delete"), st.integers(0, 9)),
    st.tuples(st.just("state"), st.integers(0, 9), st.sampled_from(STATES)),
    st.tuples(st.just("cluster"), st.integers(0, 9), st.sampled_from(CLUSTERS)),
    st.tuples(st.just("unschedulable"), st.integers(0, 9), st.sampled_from([None, 1.0])),
    st.tuples(st.just("queue"), st.integers(0, 9), st.sampled_from(["default", "a", "b"])),
    st.tuples(st.just("assign"), st.integers(0, 9), st.fixed_dictionaries({}, optional={
        "state": st.sampled_from(STATES), "cluster": st.sampled_from(CLUSTERS),
        "unschedulable_since": st.sampled_from([None, 1.0]),
        "queue": st.sampled_from(["default", "a", "b"]), "message": st.sampled_from(["", "m"]),
    })),
    st.tuples(st.just("ask"), st.integers(0, 9)),
    st.tuples(st.just("aside"), st.integers(0, 9)),
    st.tuples(st.just("restore"), st.integers(0, 9)),
)

Aside = dict[str, tuple[ActiveTask, str]]   # the model: id -> (task, queue) set aside


def _observe(tasks: ActiveTasks, aside: Aside) -> None:
    """The map has just looked (an answer): a task set aside stays so while it is the same
    object, Queued and in the same queue at each look."""
    for key, (task, queue) in list(aside.items()):
        if tasks.get(key) is not task or task.state != TaskState.QUEUED or task.queue != queue:
            del aside[key]


def _apply(tasks: ActiveTasks, kind: str, key: str, value: object) -> None:
    if (kind == "put" and key not in tasks) or kind == "replace":
        priority, seq = value  # type: ignore[misc]
        tasks[key] = _task(key, priority, seq)
    elif kind == "delete" and key in tasks:
        old = tasks.pop(key)
        old.state = TaskState.RUNNING    # a task taken out no longer counts, whatever it does
    elif kind in ("state", "cluster", "unschedulable", "queue") and key in tasks:
        field = "unschedulable_since" if kind == "unschedulable" else kind
        setattr(tasks[key], field, value)
    elif kind == "assign" and key in tasks:
        tasks[key].assign(value)   # type: ignore[arg-type]   # several fields at once


def _filing(task: ActiveTask) -> tuple[object, ...]:
    return (task.state, task.cluster, task.unschedulable_since)


def _check(tasks: ActiveTasks, aside: Aside) -> None:
    scan = list(tasks.values())
    assert tasks.queued() == [t for t in scan if t.state == TaskState.QUEUED]
    # Placement order: a stable sort of the scan's Queued tasks (ties keep the map's order).
    ranked = sorted(tasks.queued(), key=lambda t: (-t.priority, t.seq))
    assert [id(t) for t in tasks.ranked()] == [id(t) for t in ranked]    # the very tasks
    # Places in their queues: each queue's tasks numbered from 1 in that order.
    numbered: dict[str, int] = {}
    per_queue: Counter[str] = Counter()
    for t in ranked:
        per_queue[t.queue] += 1
        numbered[t.id] = per_queue[t.queue]
    assert dict(tasks.positions()) == numbered
    # Lanes: each queue's tasks in that order, but the ones set aside (counted above).
    _observe(tasks, aside)
    lanes: dict[str, list[int]] = {}
    for t in ranked:
        if t.id not in aside:
            lanes.setdefault(t.queue, []).append(id(t))
    assert {q: [id(t) for t in ts] for q, ts in tasks.lanes().items()} == lanes
    assert tasks.aside_count() == len(aside)
    assert all(tasks.is_aside(t) == (t.id in aside) for t in scan)
    for cluster in ("c0", "c1"):
        assert tasks.on_cluster(cluster) == [t for t in scan if t.cluster == cluster]
    assert tasks.unschedulable() == [t for t in scan if t.unschedulable_since is not None]
    on_any = sorted(tasks.on_clusters(), key=lambda t: t.id)
    assert [id(t) for t in on_any] == [id(t) for t in sorted(scan, key=lambda t: t.id)
                                       if t.cluster is not None]
    # The counts by state equal a full recount: no state at 0, in ``TaskState``'s order.
    recount = Counter(t.state for t in scan)
    assert list(tasks.states().items()) == [(s, recount[s]) for s in TaskState if recount[s]]


@settings(max_examples=600, deadline=None)
@given(st.lists(step, max_size=80))
def test_filed_answers_equal_a_scan_of_every_task(steps: list[tuple[object, ...]]) -> None:
    tasks = ActiveTasks()
    feed = tasks.feed()
    aside: Aside = {}
    seen: dict[str, tuple[object, ...]] = {}   # each task's filing at the last look
    for kind, index, *rest in steps:
        key = f"t{index}"
        _apply(tasks, str(kind), key, rest[0] if rest else None)
        if kind == "aside":
            tasks.set_aside([tasks[key]] if key in tasks else [])
            _observe(tasks, aside)
            if key in tasks and tasks[key].state == TaskState.QUEUED:
                aside[key] = (tasks[key], tasks[key].queue)
        elif kind == "restore":
            tasks.restore()
            aside.clear()
        if kind == "ask":
            _check(tasks, aside)
            # Every task whose filing could have changed since the last look is in the feed.
            now = {k: _filing(t) for k, t in tasks.items()}
            for k in set(seen) | set(now):
                if seen.get(k) != now.get(k):
                    assert k in feed
            seen = now
            feed.clear()
    _check(tasks, aside)


def test_a_task_taken_out_is_no_longer_watched() -> None:
    tasks = ActiveTasks({"a": _task("a")})
    task = tasks.pop("a")
    feed = tasks.feed()
    task.state = TaskState.PLACED
    assert not feed and tasks.queued() == [] and tasks.states() == {}


def test_counts_follow_a_tasks_states_and_forget_an_empty_one() -> None:
    tasks = ActiveTasks({"a": _task("a"), "b": _task("b")})
    assert tasks.states() == {TaskState.QUEUED: 2}
    tasks["a"].state = TaskState.PLACED
    tasks["a"].state = TaskState.RUNNING        # two changes between looks: counted once
    assert tasks.states() == {TaskState.QUEUED: 1, TaskState.RUNNING: 1}
    tasks["b"].cluster = "c0"                    # a change of another field moves no count
    assert tasks.states() == {TaskState.QUEUED: 1, TaskState.RUNNING: 1}
    tasks["b"] = _task("b")                      # replaced by a new object, still Queued
    del tasks["a"]
    assert tasks.states() == {TaskState.QUEUED: 1}


def _ids(tasks: ActiveTasks) -> dict[str, list[str]]:
    return {q: [t.id for t in ts] for q, ts in tasks.lanes().items()}


def test_tasks_set_aside_leave_the_lanes_keep_their_places_and_come_back_in_order() -> None:
    tasks = ActiveTasks({k: _task(k, 0, s) for k, s in (("a", 1), ("b", 2), ("c", 3))})
    tasks.set_aside([tasks["a"], tasks["c"]])
    assert _ids(tasks) == {"default": ["b"]}
    assert dict(tasks.positions()) == {"a": 1, "b": 2, "c": 3}
    tasks["a"].state = TaskState.RUNNING        # an aside task leaves the queue
    assert dict(tasks.positions()) == {"b": 1, "c": 2} and tasks.aside_count() == 1
    tasks["d"] = _task("d", 1, 9)               # ranks first
    tasks["e"] = _task("e", 0, 0)               # falls between others
    assert _ids(tasks) == {"default": ["d", "e", "b"]}
    assert dict(tasks.positions()) == {"d": 1, "e": 2, "b": 3, "c": 4}
    tasks.restore()
    assert _ids(tasks) == {"default": ["d", "e", "b", "c"]} and tasks.aside_count() == 0


def test_new_tasks_that_interleave_with_the_queue_are_merged_in_order() -> None:
    tasks = ActiveTasks({k: _task(k, 0, s) for k, s in (("a", 1), ("b", 3), ("c", 5))})
    assert _ids(tasks) == {"default": ["a", "b", "c"]}
    tasks["x"], tasks["y"] = _task("x", 0, 2), _task("y", 0, 4)
    assert _ids(tasks) == {"default": ["a", "x", "b", "y", "c"]}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "state": st.sampled_from(STATES), "cluster": st.sampled_from(CLUSTERS),
    "generation": st.integers(0, 3), "message": st.text(max_size=3),
    "reasons": st.dictionaries(st.sampled_from(["c0", "c1"]), st.text(max_size=3)),
    "saving": st.booleans(), "failover": st.booleans()}))
def test_assign_is_setting_each_field_with_one_call_of_the_watcher(
        changes: dict[str, object]) -> None:
    one, each = _task("a"), _task("a")
    calls: list[str] = []
    one.watch(lambda: calls.append("assign"))
    one.assign(changes)
    for name, value in changes.items():
        setattr(each, name, value)
    assert one == each
    watched = {"state", "cluster", "generation", "queue", "unschedulable_since"}
    assert calls == (["assign"] if watched & set(changes) else [])


def test_restore_puts_back_what_a_snapshot_took_and_files_the_task_again() -> None:
    tasks = ActiveTasks({"a": _task("a")})
    task = tasks["a"]
    snap = snapshot(task)
    task.assign({"state": TaskState.PLACED, "cluster": "c0", "generation": 1,
                 "reasons": {"c1": "full"}, "message": "placed on c0"})
    assert tasks.on_cluster("c0") == [task] and tasks.queued() == []
    restore(task, snap)
    assert task == _task("a")
    assert tasks.on_cluster("c0") == [] and tasks.queued() == [task]
