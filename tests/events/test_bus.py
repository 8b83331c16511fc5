"""The in-process event bus: numbering, reading after an id, waiting, and a bounded ring."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from hub.events.bus import Event, EventBus


def ev(name: str, kind: str = "Placed") -> Event:
    return Event("task", name, kind, "m", "2026-12-01T00:00:00+00:00")


async def test_events_are_numbered_and_read_after_an_id() -> None:
    bus = EventBus()
    for name in "abc":
        bus.publish(ev(name))
    page = await bus.read("1", timeout=0, limit=10)
    assert [(e.id, e.name) for e in page.events] == [("2", "b"), ("3", "c")]
    assert page.next == "3" and not page.truncated
    assert (await bus.read("3", timeout=0, limit=10)).events == []
    assert [e.name for e in (await bus.read("0", timeout=0, limit=2)).events] == ["a", "b"]


async def test_a_reader_waits_for_the_next_event() -> None:
    bus = EventBus()
    reader = asyncio.create_task(bus.read(None, timeout=10, limit=10))
    await asyncio.sleep(0.05)
    assert not reader.done()
    bus.publish(ev("late", "Succeeded"))
    page = await asyncio.wait_for(reader, 5)
    assert [(e.name, e.terminal) for e in page.events] == [("late", True)]


async def test_a_batch_is_numbered_in_order_seen_by_subscribers_and_wakes_a_reader() -> None:
    bus = EventBus()
    heard: list[tuple[str, str]] = []
    bus.subscribe(lambda e: heard.append((e.id, e.name)))
    bus.publish(ev("first"))
    reader = asyncio.create_task(bus.read("1", timeout=10, limit=10))
    await asyncio.sleep(0.05)
    bus.publish_many(("task", name, "Placed", "m", "2026-12-01T00:00:00+00:00", "c1", 2, name)
                     for name in "xyz")
    page = await asyncio.wait_for(reader, 5)
    assert [(e.id, e.name, e.cluster, e.generation) for e in page.events] == [
        ("2", "x", "c1", 2), ("3", "y", "c1", 2), ("4", "z", "c1", 2)]
    assert heard == [("1", "first"), ("2", "x"), ("3", "y"), ("4", "z")]
    bus.publish_many(())
    assert bus.last_id == "4"


async def test_a_reader_behind_the_ring_is_told_it_missed_events() -> None:
    bus = EventBus(capacity=3)
    for i in range(5):
        bus.publish(ev(f"t{i}"))
    page = await bus.read("0", timeout=0, limit=10)
    assert [e.id for e in page.events] == ["3", "4", "5"] and page.truncated
    assert not (await bus.read("2", timeout=0, limit=10)).truncated


@pytest.mark.parametrize("bad", ["x", "1-0", "-1"])
async def test_a_malformed_id_is_refused(bad: str) -> None:
    with pytest.raises(InvalidInput):
        await EventBus().read(bad, timeout=0, limit=1)


@given(st.integers(0, 40), st.integers(0, 45), st.integers(1, 20))
async def test_every_event_after_the_cursor_and_only_those(count: int, since: int,
                                                           capacity: int) -> None:
    bus = EventBus(capacity=capacity)
    for i in range(count):
        bus.publish(ev(f"t{i}"))
    page = await bus.read(str(since), timeout=0, limit=1000)
    kept = range(max(1, count - capacity + 1), count + 1)
    assert [int(e.id) for e in page.events] == [i for i in kept if i > since]
    assert page.truncated == (since + 1 < kept.start and since < count)


_STEP = st.one_of(
    st.tuples(st.just("one"), st.integers(0, 9)),
    st.tuples(st.just("batch"), st.lists(st.tuples(st.integers(0, 9), st.booleans()),
                                         max_size=6)),
)


@given(steps=st.lists(_STEP, max_size=12), capacity=st.integers(1, 12),
       subscribed=st.booleans(), since=st.integers(0, 40), limit=st.integers(1, 15))
async def test_rows_kept_unread_read_as_the_events_they_stand_for(
        steps: list[tuple[str, object]], capacity: int, subscribed: bool, since: int,
        limit: int) -> None:
    """``publish_many`` keeps its rows (times as ``datetime``s) until read: any mix of
    single events and batches reads back, for any cursor and limit, as the events built
    at once would (a model of the ring), with or without a subscriber hearing them."""
    bus = EventBus(capacity=capacity)
    heard: list[Event] = []
    if subscribed:
        bus.subscribe(heard.append)
    model: list[Event] = []
    for what, arg in steps:
        if what == "one":
            event = ev(f"c{arg}")
            bus.publish(event)
            model.append(replace(event, id=str(len(model) + 1)))
            continue
        rows = []
        for i, as_text in arg:  # type: ignore[attr-defined]
            at = datetime(2026, 12, 4, 22, i, 30, 1234 * i, tzinfo=UTC)
            rows.append(("task", f"t{i}", "Running", f"on c{i}", at.isoformat() if as_text
                         else at, f"c{i}" if i % 2 else None, i, f"id-{i}"))
        bus.publish_many(iter(rows))
        for row in rows:
            at = row[4]
            model.append(Event(*row[:4], at if isinstance(at, str) else at.isoformat(),
                               *row[5:], id=str(len(model) + 1)))
    kept = model[-capacity:]
    page = await bus.read(str(since), timeout=0, limit=limit)
    want = [e for e in kept if int(e.id) > since][:limit]
    assert page.events == want
    assert page.next == (want[-1].id if want else str(since))
    assert page.truncated == bool(kept and since + 1 < int(kept[0].id) and since < len(model))
    assert bus.last_id == str(len(model))
    if subscribed:
        assert heard == model
