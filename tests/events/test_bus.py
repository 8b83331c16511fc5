"""The in-process event bus: numbering, reading after an id, waiting, and a bounded ring."""

from __future__ import annotations

import asyncio

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
