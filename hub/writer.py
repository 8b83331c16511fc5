"""The store's one writer path, with group commit.

Every write the hub makes goes through ``StoreWriter``: a single worker thread, so writes are
serialized, and ``apply`` and ``add_tasks`` calls queued while a commit is in flight are
merged into the next single transaction of their kind (a batched commit: the queued
``apply``s in one ``Store.apply``, the queued submits in one ``Store.write``; each kind in
its own order, one kind taken past the other, see ``_take``), up to about
``MAX_ROWS_PER_COMMIT`` rows; if it fails, each call is retried alone, so one submit's
taken name fails that submit only, with the reason it would get alone.

Merging submits matters beside a busy event loop: each transaction waits for the GIL at
every SQLite step (``BEGIN``, the epoch fence, each row, ``COMMIT``), so at half load in
REST batches of 10 the writer spent ~17 ms of wall a submit for ~5 ms of its CPU, was busy
~97% of the time, and placements queued behind the submits (docs/benchmarks.md, e2e
section, "Twentieth pass"). Taking each kind from the whole queue matters as much: agent
reports' writes (one ``enqueue`` a report) queue between submits, and merging only runs of
one kind made most commits a single call, with ~100 calls waiting (the "Twenty-first
pass").

More than the bound is committed in parts, the first part durable (and its placements sent)
while the next is written, so one huge transaction (a failover's cycle behind a burst of
agent reports) does not hold the first placements until its last row. The bound is high on
purpose: at 200 rows the parts slowed tasks to Running at light load (10 members, quiet
machine, medians of three: tasks reached Running at 0.89x the rate of no bound, burst P50
1.32 against 0.98 s, hub CPU a task 1.10x), although they helped on a machine loaded 2.5-38
(docs/benchmarks.md, batch and ninth passes). Reads do not come here: they run on other
threads (``read``) and, on SQLite in WAL mode, never wait for the writer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from hub.store import EventRecord, NewTasks, PlacementRecord, Store, TaskRecord, TaskUpdate
from hub.store.records import AuditRecord

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_ROWS_PER_COMMIT = 10_000   # rows (updates, events, placements, new tasks) a transaction


@dataclass
class _Batch:
    """One queued write: an ``apply`` (``new`` None; ``done`` gets None) or an
    ``add_tasks`` (``done`` gets the stored tasks)."""

    updates: Sequence[TaskUpdate]
    events: Sequence[EventRecord]
    placements: Sequence[PlacementRecord]
    done: asyncio.Future[Any]
    new: NewTasks | None = None

    @property
    def rows(self) -> int:
        new = self.new
        extra = 0 if new is None else len(new.tasks) + len(new.events) + 1
        return len(self.updates) + len(self.events) + len(self.placements) + extra


def _take(pending: list[_Batch], limit: int) -> tuple[list[_Batch], list[_Batch]]:
    """The batches one commit takes, and the ones left, in order: whole batches, at least
    one, no more once ``limit`` rows are reached, all of the first pending batch's kind
    (``apply``s, or ``add_tasks``) - taken from anywhere in the queue, so a queue where
    agent reports' writes and submits alternate is two transactions, not one each.

    Taking one kind past the other keeps each kind's own order and reorders nothing that
    depends on the other: an ``apply`` only names tasks already stored (a task is known,
    to be placed or reported on, only once its submit returned), and a submit's names are
    checked against every stored task, whatever its state."""
    submits = pending[0].new is not None
    taken: list[_Batch] = []
    left: list[_Batch] = []
    rows = 0
    for i, batch in enumerate(pending):
        if (batch.new is not None) != submits:
            left.append(batch)
            continue
        taken.append(batch)
        rows += batch.rows
        if rows >= limit:
            left.extend(pending[i + 1:])
            break
    return taken, left


class StoreWriter:
    """Serializes writes on one thread and merges concurrent ``apply`` calls."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer")
        self._readers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="store-reader")
        self._pending: list[_Batch] = []
        self._flushing = False
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0      # transactions made by the group commit (for metrics and tests)
        self.batches = 0      # apply and add_tasks calls served

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one write on the writer thread and wait for it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: fn(*args, **kwargs))

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a read on a reader thread (never queued behind writes)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(*args, **kwargs))

    async def apply(
        self,
        updates: Sequence[TaskUpdate] = (),
        events: Sequence[EventRecord] = (),
        placements: Sequence[PlacementRecord] = (),
    ) -> None:
        """Commit task updates, events and placements; waits until they are durable."""
        await self.enqueue(updates, events, placements)

    async def add_tasks(self, tasks: Sequence[TaskRecord], events: Sequence[EventRecord],
                        audit: AuditRecord | None = None) -> list[TaskRecord]:
        """``Store.add_tasks`` through the group commit: stored with whatever writes are
        queued with it (all or nothing with them, or alone if they fail); its own
        ``Conflict`` or ``NotFound`` as ``Store.add_tasks`` raises them."""
        loop = asyncio.get_running_loop()
        batch = _Batch((), (), (), loop.create_future(),
                       NewTasks(list(tasks), list(events), audit))
        self._push(batch)
        stored: list[TaskRecord] = await batch.done
        return stored

    def enqueue(
        self,
        updates: Sequence[TaskUpdate] = (),
        events: Sequence[EventRecord] = (),
        placements: Sequence[PlacementRecord] = (),
    ) -> asyncio.Future[None]:
        """Queue a commit without waiting; writes keep their order. A failure is logged.

        For what may be lost in a crash because it is re-derived (agent reports: the agent's
        full inventory after a reconnect repeats them); anything acted on outside the hub
        must use ``apply`` and wait.
        """
        loop = asyncio.get_running_loop()
        # No done-callback per batch (one per agent report adds up): a failure is logged
        # where it happens, in ``_apply_alone``.
        batch = _Batch(list(updates), list(events), list(placements), loop.create_future())
        self._push(batch)
        return batch.done

    def _push(self, batch: _Batch) -> None:
        self._pending.append(batch)
        if not self._flushing:
            self._flushing = True
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending:
                batches, self._pending = _take(self._pending, MAX_ROWS_PER_COMMIT)
                try:
                    new = [b.new for b in batches if b.new is not None]
                    results: list[list[TaskRecord] | None] = [None] * len(batches)
                    if new:
                        results[:] = await self.call(
                            self.store.write, new,
                            what=f"add the tasks of {len(new)} submit(s)")
                    else:
                        await self.call(
                            self.store.apply,
                            [u for b in batches for u in b.updates],
                            [e for b in batches for e in b.events],
                            [p for b in batches for p in b.placements],
                        )
                    self.commits += 1
                    self.batches += len(batches)
                    for b, result in zip(batches, results, strict=True):
                        if not b.done.done():
                            b.done.set_result(result)
                except Exception:
                    # One bad batch must not fail its neighbours: retry each on its own.
                    for b in batches:
                        await self._apply_alone(b)
        finally:
            self._flushing = False

    async def _apply_alone(self, b: _Batch) -> None:
        new = b.new
        try:
            result: list[TaskRecord] | None = None
            if new is not None:
                result = await self.call(self.store.add_tasks, new.tasks, new.events,
                                         new.audit)
            else:
                await self.call(self.store.apply, b.updates, b.events, b.placements)
            self.commits += 1
            self.batches += 1
            if not b.done.done():
                b.done.set_result(result)
        except Exception as exc:
            if new is None:   # a submit's refusal is its caller's answer, not an error here
                log.error("store write failed: %s", exc)
            if not b.done.done():
                b.done.set_exception(exc)
                b.done.exception()   # logged above or raised to the submit's caller: no
                # "never retrieved" warning as well

    def close(self) -> None:
        """Wait for queued writes and stop the threads."""
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
