"""Tasks, events and placements: what the hub writes and reads back, on both backends."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from fuyao.errors import Conflict, InvalidInput, NotFound
from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate
from hub.store.records import AuditRecord
from tests.store.make import T0, at, submitted, task


def test_added_tasks_come_back_with_increasing_seq(store: Store) -> None:
    first = store.add_tasks([task("a"), task("b")], [])
    second = store.add_tasks([task("c")], [])
    seqs = [t.seq for t in first + second]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert [t.name for t in store.list_tasks()] == ["a", "b", "c"]
    assert store.get_task("b") == first[1]
    assert store.get_task_by_id("id-c") == second[0]


def test_task_fields_round_trip(store: Store) -> None:
    rec = task("full", priority=7, queue="research", spec={"nested": {"list": [1, "x", None]}},
               reasons={"east": "no node with 4 free GPUs"},
               scores=[{"cluster": "east", "feasible": False, "score": None}],
               message="waiting", generation=2, cluster="east", node="n1")
    [stored] = store.add_tasks([rec], [])
    assert store.get_task("full") == stored
    assert stored.spec == {"nested": {"list": [1, "x", None]}}
    assert stored.reasons == {"east": "no node with 4 free GPUs"}


@pytest.mark.parametrize(
    ("existing", "batch", "wanted"),
    [
        pytest.param(["a"], ["b", "a"], "already exist: a", id="taken-by-stored-task"),
        pytest.param([], ["x", "y", "x"], "repeated in the batch: x", id="twice-in-batch"),
        pytest.param(["a", "b"], ["b", "c", "c", "a"], "already exist: b, a",
                     id="every-duplicate-named"),
    ],
)
def test_duplicate_names_are_rejected_and_nothing_is_stored(
    store: Store, existing: list[str], batch: list[str], wanted: str
) -> None:
    store.add_tasks([task(n) for n in existing], [])
    with pytest.raises(Conflict, match=wanted) as caught:
        store.add_tasks([task(n, id=f"new-{i}") for i, n in enumerate(batch)], [])
    if "c" in batch:
        assert "repeated in the batch: c" in caught.value.message
    assert [t.name for t in store.list_tasks()] == existing
    for i in range(len(batch)):
        with pytest.raises(NotFound):
            store.get_task_by_id(f"new-{i}")


def test_add_tasks_is_all_or_nothing_when_an_event_is_bad(store: Store) -> None:
    good = task("good")
    orphan = EventRecord(task_id="no-such-task", at=T0, kind="Submitted", message="")
    with pytest.raises(NotFound, match="no-such-task"):
        store.add_tasks([good], [submitted(good), orphan])
    assert store.list_tasks() == []
    with pytest.raises(NotFound):
        store.get_task("good")


def test_a_submits_audit_record_commits_with_its_tasks_or_not_at_all(store: Store) -> None:
    ok = AuditRecord(actor="alice", action="task.submit", target="a,b", result="ok")
    store.add_tasks([task("a"), task("b")], [], audit=ok)
    assert [(e["actor"], e["target"], e["result"]) for e in store.audit_log()] == [
        ("alice", "a,b", "ok")]
    again = AuditRecord(actor="bob", action="task.submit", target="c,a", result="ok")
    with pytest.raises(Conflict, match="already exist: a"):
        store.add_tasks([task("c", id="id-c"), task("a", id="id-a2")], [], audit=again)
    assert [e["actor"] for e in store.audit_log()] == ["alice"]     # rolled back with c
    assert [t.name for t in store.list_tasks()] == ["a", "b"]


def test_submission_events_are_stored_with_their_tasks(store: Store) -> None:
    recs = [task("a"), task("b")]
    store.add_tasks(recs, [submitted(r) for r in recs])
    assert [e.kind for e in store.task_events("id-a")] == ["Submitted"]
    assert store.task_events("id-b")[0].task_id == "id-b"


def test_apply_writes_only_the_changed_fields(store: Store) -> None:
    store.add_tasks([task("a", message="queued", reasons={"west": "cordoned"})], [])
    store.apply([TaskUpdate("id-a", {"state": "Placed", "cluster": "east", "generation": 1,
                                     "updated_at": at(5)})])
    got = store.get_task("a")
    assert (got.state, got.cluster, got.generation, got.updated_at) == ("Placed", "east", 1,
                                                                       at(5))
    assert (got.message, got.reasons, got.queue) == ("queued", {"west": "cordoned"}, "default")


def test_later_updates_of_a_task_in_one_batch_win(store: Store) -> None:
    store.add_tasks([task("a"), task("b")], [])
    store.apply([
        TaskUpdate("id-a", {"state": "Placed", "cluster": "east"}),
        TaskUpdate("id-b", {"state": "Placed"}),
        TaskUpdate("id-a", {"state": "Running", "node": "n7"}),
    ])
    a, b = store.get_task("a"), store.get_task("b")
    assert (a.state, a.cluster, a.node) == ("Running", "east", "n7")
    assert (b.state, b.cluster) == ("Placed", None)


def test_apply_is_atomic_when_one_task_is_unknown(store: Store) -> None:
    store.add_tasks([task("a")], [])
    with pytest.raises(NotFound, match="ghost"):
        store.apply(
            [TaskUpdate("id-a", {"state": "Placed"}), TaskUpdate("ghost", {"state": "Placed"})],
            [EventRecord("id-a", at(1), "Placed", "on east")],
            [PlacementRecord("id-a", "east", 1, at(1), ["n1"])],
        )
    assert store.get_task("a").state == "Queued"
    assert store.task_events("id-a") == []
    assert store.placements("id-a") == []


def test_apply_rolls_back_updates_when_a_later_write_fails(store: Store) -> None:
    store.add_tasks([task("a")], [])
    broken = EventRecord("id-a", at(1), None, "kind is required")  # type: ignore[arg-type]
    with pytest.raises(Conflict):
        store.apply([TaskUpdate("id-a", {"state": "Placed"})], [broken])
    assert store.get_task("a").state == "Queued"
    assert store.task_events("id-a") == []


def test_a_task_id_repeated_in_a_batch_stores_nothing(store: Store) -> None:
    with pytest.raises(Conflict):
        store.add_tasks([task("a", id="same"), task("b", id="same")], [])
    assert store.list_tasks() == []


@pytest.mark.parametrize(
    ("changes", "wanted"),
    [
        pytest.param({"name": "renamed"}, "name", id="not-updatable"),
        pytest.param({"seq": 9}, "seq", id="seq-is-the-stores"),
        pytest.param({"updated_at": T0.replace(tzinfo=None)}, "no timezone", id="naive-time"),
        # The same keys as a good update before it: each update's values are still checked.
        pytest.param({"state": "Running", "updated_at": T0.replace(tzinfo=None)}, "no timezone",
                     id="naive-time-keys-seen"),
        pytest.param({"updated_at": T0, "state": "Running", "seq": 9}, "seq",
                     id="not-updatable-among-seen-keys"),
    ],
)
def test_bad_updates_are_rejected_and_change_nothing(
    store: Store, changes: dict[str, object], wanted: str
) -> None:
    store.add_tasks([task("a")], [])
    with pytest.raises(InvalidInput, match=wanted):
        store.apply([TaskUpdate("id-a", {"state": "Placed"}),
                     TaskUpdate("id-a", {"state": "Placed", "updated_at": T0}),
                     TaskUpdate("id-a", changes)])
    assert store.get_task("a") == store.list_tasks()[0]
    assert store.get_task("a").state == "Queued"


def test_events_are_ordered_by_time_then_insertion(store: Store) -> None:
    store.add_tasks([task("a")], [])
    store.apply(events=[EventRecord("id-a", at(10), "Placed", "first at 10")])
    store.apply(events=[EventRecord("id-a", at(10), "Running", "second at 10"),
                        EventRecord("id-a", at(20), "Succeeded", "at 20")])
    store.apply(events=[EventRecord("id-a", at(5), "Accepted", "late report of 5",
                                    cluster="east", generation=1)])
    events = store.task_events("id-a")
    assert [e.message for e in events] == ["late report of 5", "first at 10", "second at 10",
                                           "at 20"]
    assert (events[0].cluster, events[0].generation) == ("east", 1)


def test_one_commits_times_in_any_zone_are_stored_as_the_same_utc_instant(store: Store) -> None:
    """A commit converts each distinct time once (``convert.utc_memo``): an equal instant
    given in another zone, or another instant, is still its own UTC time."""
    store.add_tasks([task("a")], [])
    east = timezone(timedelta(hours=8))
    store.apply(events=[EventRecord("id-a", at(10), "Placed", "utc"),
                        EventRecord("id-a", at(10).astimezone(east), "Running", "east"),
                        EventRecord("id-a", at(11).astimezone(east), "Succeeded", "later")],
                placements=[PlacementRecord("id-a", "c0", 1, at(10).astimezone(east), [])])
    assert [(e.at, e.message) for e in store.task_events("id-a")] == [
        (at(10), "utc"), (at(10), "east"), (at(11), "later")]
    assert store.placements("id-a")[0].at == at(10)
    assert store.placements("id-a")[0].at.utcoffset() == timedelta(0)


def test_placements_keep_every_generation(store: Store) -> None:
    store.add_tasks([task("a")], [])
    store.apply(placements=[PlacementRecord("id-a", "east", 1, at(1), ["n1", "n2"])])
    store.apply(placements=[PlacementRecord("id-a", "west", 2, at(9), [])])
    assert store.placements("id-a") == [
        PlacementRecord("id-a", "east", 1, at(1), ["n1", "n2"]),
        PlacementRecord("id-a", "west", 2, at(9), []),
    ]
    assert store.placements("id-missing") == []


def test_list_filters(store: Store) -> None:
    store.add_tasks([task("q1"), task("p1"), task("r1"), task("q2"), task("r2")], [])
    store.apply([
        TaskUpdate("id-p1", {"state": "Placed", "cluster": "east"}),
        TaskUpdate("id-r1", {"state": "Running", "cluster": "west"}),
        TaskUpdate("id-r2", {"state": "Running", "cluster": "east"}),
    ])

    def names(**filters: object) -> list[str]:
        return [t.name for t in store.list_tasks(**filters)]  # type: ignore[arg-type]

    assert names(state="Queued") == ["q1", "q2"]
    assert names(cluster="east") == ["p1", "r2"]
    assert names(states=["Placed", "Running"]) == ["p1", "r1", "r2"]
    assert names(states=["Running"], cluster="east") == ["r2"]
    assert names(states=[]) == []
    assert names(state="Succeeded") == []


def test_times_come_back_as_aware_utc(store: Store) -> None:
    plus8 = timezone(timedelta(hours=8))
    store.add_tasks([task("a", created_at=T0.astimezone(plus8))], [])
    got = store.get_task("a").created_at
    assert got == T0 and got.utcoffset() == timedelta(0)


def test_naive_times_are_rejected(store: Store) -> None:
    with pytest.raises(InvalidInput, match=r"created_at .* no timezone"):
        store.add_tasks([task("a", created_at=T0.replace(tzinfo=None))], [])
    assert store.list_tasks() == []


def test_unknown_tasks_are_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="task nope not found"):
        store.get_task("nope")
    with pytest.raises(NotFound, match="id nope not found"):
        store.get_task_by_id("nope")
