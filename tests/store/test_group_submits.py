"""Submits through the store writer's group commit (``hub.writer``, ``Store.write``), on both
backends: submits queued while a commit is in flight are stored in one transaction, each gets
back its own tasks with their ``seq``s in submit order, each with its audit record; a submit
the store refuses (a taken name) fails alone, with the reason it gets alone, and the submits
merged with it are stored."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from fuyao.errors import Conflict
from hub.store import EventRecord, NewTasks, Store
from hub.store.records import AuditRecord
from hub.writer import StoreWriter
from tests.store.make import at, submitted, task


def _audit(target: str) -> AuditRecord:
    return AuditRecord(actor="alice", action="task.submit", target=target, result="ok")


def test_several_submits_write_in_one_transaction_all_or_nothing(store: Store) -> None:
    a, b, c = task("a"), task("b"), task("c")
    first, second = store.write([NewTasks([a, b], [submitted(a), submitted(b)], _audit("a,b")),
                                 NewTasks([c], [submitted(c)], _audit("c"))])
    assert [t.name for t in first] == ["a", "b"] and [t.name for t in second] == ["c"]
    seqs = [t.seq for t in first + second]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert store.get_task("c") == second[0]
    assert sorted(e["target"] for e in store.audit_log()) == ["a,b", "c"]
    assert [e.kind for e in store.task_events("id-a")] == ["Submitted"]
    # One part refused (a taken name): nothing of the write is stored.
    d, again = task("d"), task("a", id="id-a2")
    with pytest.raises(Conflict):
        store.write([NewTasks([d], [submitted(d)], _audit("d")),
                     NewTasks([again], [], _audit("a"))])
    assert [t.name for t in store.list_tasks()] == ["a", "b", "c"]
    assert len(store.audit_log()) == 2


class _Held:
    """The writer's store, whose first ``apply`` waits for ``go`` (so writes queue up behind
    it) and whose transactions are counted by kind."""

    def __init__(self, store: Store) -> None:
        self.store, self.go = store, threading.Event()
        self.writes: list[int] = []       # submits per merged write
        self.applies: list[int] = []      # events per apply
        self.alone: list[str] = []        # submits retried alone (their first task's name)

    def apply(self, updates: Any, events: Sequence[Any], *args: Any) -> None:
        assert self.go.wait(10)
        self.applies.append(len(events))
        self.store.apply(updates, events, *args)

    def write(self, new: Sequence[NewTasks], *args: Any, **kwargs: Any) -> Any:
        self.writes.append(len(new))
        return self.store.write(new, *args, **kwargs)

    def add_tasks(self, tasks: Sequence[Any], *args: Any) -> Any:
        self.alone.append(tasks[0].name)
        return self.store.add_tasks(tasks, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
def held(store: Store) -> Iterator[tuple[_Held, StoreWriter]]:
    wrapped = _Held(store)
    writer = StoreWriter(wrapped)  # type: ignore[arg-type]
    try:
        yield wrapped, writer
    finally:
        wrapped.go.set()
        writer.close()


async def _queued_behind_a_commit(writer: StoreWriter, *names: str) -> list[asyncio.Task[Any]]:
    """Submits of one task each, queued while the writer's first commit is held."""
    first = writer.enqueue()          # an empty apply: held in the store's apply
    await asyncio.sleep(0.05)         # its commit is in flight
    submits = [asyncio.create_task(writer.add_tasks([task(n, id=f"id-{i}-{n}")], [],
                                                    audit=_audit(n)))
               for i, n in enumerate(names)]
    await asyncio.sleep(0.05)         # all queued behind it
    assert not first.done()
    return submits


async def test_submits_queued_together_commit_together(
        held: tuple[_Held, StoreWriter]) -> None:
    wrapped, writer = held
    submits = await _queued_behind_a_commit(writer, "x", "y", "z")
    wrapped.go.set()
    stored = await asyncio.gather(*submits)
    assert wrapped.writes == [3] and wrapped.alone == []       # one transaction for three
    assert [[t.name for t in s] for s in stored] == [["x"], ["y"], ["z"]]
    seqs = [s[0].seq for s in stored]
    assert seqs == sorted(seqs)
    assert sorted(e["target"] for e in wrapped.store.audit_log()) == ["x", "y", "z"]


async def test_a_refused_submit_fails_alone(held: tuple[_Held, StoreWriter]) -> None:
    wrapped, writer = held
    submits = await _queued_behind_a_commit(writer, "p", "p", "q")   # the second takes p
    wrapped.go.set()
    results = await asyncio.gather(*submits, return_exceptions=True)
    assert [t.name for t in results[0]] == ["p"] and [t.name for t in results[2]] == ["q"]
    assert isinstance(results[1], Conflict) and "already exist: p" in str(results[1])
    assert wrapped.writes == [3] and wrapped.alone == ["p", "p", "q"]   # merged, then alone
    assert [t.name for t in wrapped.store.list_tasks()] == ["p", "q"]
    assert sorted(e["target"] for e in wrapped.store.audit_log()) == ["p", "q"]


async def test_reports_and_submits_queued_alternately_are_two_transactions(
        held: tuple[_Held, StoreWriter]) -> None:
    """Agent reports' writes queued between submits do not cut the submits' group commit
    (nor the submits the reports'): each kind is one transaction, in its own order."""
    wrapped, writer = held
    stored = task("s")
    wrapped.store.add_tasks([stored], [submitted(stored)])
    first = writer.enqueue()          # an empty apply: held in the store's apply
    await asyncio.sleep(0.05)
    queued: list[asyncio.Future[Any]] = []
    for i, name in enumerate(["x", "y", "z"]):
        queued.append(asyncio.ensure_future(writer.add_tasks(
            [task(name, id=f"id-{i}-{name}")], [], audit=_audit(name))))
        await asyncio.sleep(0)        # the submit is queued before the report
        queued.append(writer.enqueue(events=[EventRecord(
            stored.id, at(i), "Running", f"report {i}")]))
    await asyncio.sleep(0.05)
    assert not first.done()
    wrapped.go.set()
    results = await asyncio.gather(*queued)
    assert wrapped.writes == [3] and wrapped.applies == [0, 3]
    assert [[t.name for t in r] for r in results[0::2]] == [["x"], ["y"], ["z"]]
    seqs = [r[0].seq for r in results[0::2]]
    assert seqs == sorted(seqs)
    assert [e.message for e in wrapped.store.task_events(stored.id)][1:] == [
        "report 0", "report 1", "report 2"]
