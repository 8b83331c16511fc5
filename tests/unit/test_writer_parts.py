"""The store writer's group commit in parts (``hub.writer``): what queued up while a commit
was in flight is merged in order, whole writes only, into transactions of about
``MAX_ROWS_PER_COMMIT`` rows, and the first part is durable before the next is written."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from hub import writer as writer_module
from hub.store import EventRecord
from hub.writer import StoreWriter

AT = datetime(2026, 12, 2, tzinfo=UTC)


class _Store:
    """Records each transaction's events; ``fail`` makes a transaction with that task fail;
    every transaction after the first waits for ``go``."""

    def __init__(self, fail: str = "") -> None:
        self.commits: list[list[str]] = []
        self.fail = fail
        self.go = threading.Event()

    def apply(self, updates: Sequence[object], events: Sequence[EventRecord],
              placements: Sequence[object]) -> None:
        if self.commits:
            assert self.go.wait(10)
        ids = [e.task_id for e in events]
        if self.fail in ids:
            raise RuntimeError(f"{self.fail} refused")
        self.commits.append(ids)


def _events(*ids: str) -> list[EventRecord]:
    return [EventRecord(i, AT, "Note", "") for i in ids]


@pytest.fixture
def small_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "MAX_ROWS_PER_COMMIT", 3)


async def test_what_queued_up_commits_in_parts_in_order_whole_writes_only(
        small_commits: None) -> None:
    store = _Store()
    writer = StoreWriter(store)  # type: ignore[arg-type]
    try:
        first = writer.enqueue(events=_events("a"))
        await asyncio.sleep(0)      # its commit is in flight: the next writes queue up
        later = [writer.enqueue(events=_events(*ids))
                 for ids in (["b", "c"], ["d"], ["e", "f", "g", "h"], ["i"])]
        await first
        # The first write is durable while those queued behind it are not written yet.
        assert store.commits == [["a"]]
        assert not any(f.done() for f in later)
        store.go.set()
        await asyncio.gather(*later)
        # In order; at least one write a commit; no more once 3 rows are reached; a write
        # bigger than that alone, never split.
        assert store.commits == [["a"], ["b", "c", "d"], ["e", "f", "g", "h"], ["i"]]
        assert (writer.commits, writer.batches) == (4, 5)
    finally:
        writer.close()


async def test_a_failed_part_fails_only_its_own_write(small_commits: None) -> None:
    store = _Store(fail="c")
    writer = StoreWriter(store)  # type: ignore[arg-type]
    try:
        store.go.set()
        first = writer.enqueue(events=_events("a"))
        await asyncio.sleep(0)
        bad = writer.enqueue(events=_events("b"))
        worse = writer.enqueue(events=_events("c"))
        after = writer.enqueue(events=_events("d", "e", "f"))
        await first
        await bad
        with pytest.raises(RuntimeError, match="c refused"):
            await worse
        await after
        assert store.commits == [["a"], ["b"], ["d", "e", "f"]]
    finally:
        writer.close()
