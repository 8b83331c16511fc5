"""The store's one writer path, with group commit.

Every write the hub makes goes through ``StoreWriter``: a single worker thread, so writes are
serialized, and ``apply`` calls queued while a commit is in flight are merged into the next
single transaction (a batched commit), in order, up to about ``MAX_ROWS_PER_COMMIT`` rows;
more is committed in parts, the first part durable (and its placements sent) while the next
is written, so one huge transaction (a failover's cycle behind a burst of agent reports)
does not hold the first placements until its last row. The bound is high on purpose: at 200
rows the parts slowed tasks to Running at light load (10 members, quiet machine, medians of
three: tasks reached Running at 0.89x the rate of no bound, burst P50 1.32 against 0.98 s,
hub CPU a task 1.10x), although they helped on a machine loaded 2.5-38 (docs/benchmarks.md,
batch and ninth passes). Reads do not come here: they run on other threads (``read``) and,
on SQLite in WAL mode, never wait for the writer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_ROWS_PER_COMMIT = 10_000   # updates + events + placements merged into one transaction


@dataclass
class _Batch:
    updates: Sequence[TaskUpdate]
    events: Sequence[EventRecord]
    placements: Sequence[PlacementRecord]
    done: asyncio.Future[None]

    @property
    def rows(self) -> int:
        return len(self.updates) + len(self.events) + len(self.placements)


def _take(pending: list[_Batch], limit: int) -> int:
    """How many of the first pending batches one commit takes: in order, whole batches
    only, at least one, and no more once ``limit`` rows are reached."""
    rows = 0
    for i, batch in enumerate(pending):
        rows += batch.rows
        if rows >= limit:
            return i + 1
    return len(pending)


class StoreWriter:
    """Serializes writes on one thread and merges concurrent ``apply`` calls."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer")
        self._readers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="store-reader")
        self._pending: list[_Batch] = []
        self._flushing = False
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0      # transactions made by apply (for metrics and tests)
        self.batches = 0      # apply calls served

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
        self._pending.append(batch)
        if not self._flushing:
            self._flushing = True
            self._flusher = loop.create_task(self._flush())
        return batch.done

    async def _flush(self) -> None:
        try:
            while self._pending:
                n = _take(self._pending, MAX_ROWS_PER_COMMIT)
                batches, self._pending = self._pending[:n], self._pending[n:]
                try:
                    await self.call(
                        self.store.apply,
                        [u for b in batches for u in b.updates],
                        [e for b in batches for e in b.events],
                        [p for b in batches for p in b.placements],
                    )
                    self.commits += 1
                    self.batches += len(batches)
                    for b in batches:
                        if not b.done.done():
                            b.done.set_result(None)
                except Exception:
                    # One bad batch must not fail its neighbours: retry each on its own.
                    for b in batches:
                        await self._apply_alone(b)
        finally:
            self._flushing = False

    async def _apply_alone(self, b: _Batch) -> None:
        try:
            await self.call(self.store.apply, b.updates, b.events, b.placements)
            self.commits += 1
            self.batches += 1
            if not b.done.done():
                b.done.set_result(None)
        except Exception as exc:
            log.error("store write failed: %s", exc)
            if not b.done.done():
                b.done.set_exception(exc)
                b.done.exception()   # logged above: no "never retrieved" warning as well

    def close(self) -> None:
        """Wait for queued writes and stop the threads."""
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
