"""The in-process event bus: numbered task and cluster events in a bounded ring.

``EventHub`` publishes into it (on the event loop); the events endpoint reads from it when
the hub has no Redis (``read``: events after an id, waiting up to a timeout for the next);
the Redis publisher drains its own queue fed by ``subscribe``. Ids are decimal strings of
a counter that starts at 1 with each process; the ring keeps the last ``capacity`` events,
so a watcher resuming from an older id is told some were missed (``truncated``).

A commit's task events are kept as the rows they were published as (``publish_many``: a
tuple each, its time a ``datetime``) and made ``Event``s only when a reader reads them:
a hub writes four or five events a task and nobody may be watching, so building each
event and formatting its time up front cost the event loop about 4 us an event (0.3 us
kept as a row; docs/events.md). With a subscriber (the Redis publisher) every event is
built at once, as the subscriber needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from fuyao.errors import InvalidInput

DEFAULT_CAPACITY = 10_000
TERMINAL_KINDS = frozenset({"Succeeded", "Failed", "Cancelled"})


@dataclass(frozen=True, slots=True)
class Event:
    """One task or cluster event, as watchers see it (``id`` is set by the source)."""

    type: str                   # "task" | "cluster"
    name: str                   # task or cluster name
    kind: str                   # Submitted, Placed, Running, Succeeded, ... | Ready, Unknown, ...
    message: str
    at: str                     # ISO 8601, UTC
    cluster: str | None = None
    generation: int = 0
    task_id: str | None = None
    id: str = ""

    @property
    def terminal(self) -> bool:
        """True for the last event of a task."""
        return self.type == "task" and self.kind in TERMINAL_KINDS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the events endpoint answers and Redis stores it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], event_id: str) -> Event:
        """Back from ``to_dict`` with the id its source gave it."""
        fields = {k: data[k] for k in ("type", "name", "kind", "message", "at") if k in data}
        return cls(**fields, cluster=data.get("cluster"), generation=int(data.get("generation", 0)),
                   task_id=data.get("task_id"), id=event_id)


# An event's fields but its id, in ``Event``'s order: what ``publish_many`` numbers (its
# time as ISO 8601 text, or a timezone-aware ``datetime`` formatted when it is read).
EventFields = tuple[str, str, str, str, str | datetime, str | None, int, str | None]


def _event(row: EventFields, number: int) -> Event:
    """The event a kept row stands for, with its id."""
    kind, name, what, message, at, cluster, generation, task_id = row
    return Event(kind, name, what, message, at if isinstance(at, str) else at.isoformat(),
                 cluster, generation, task_id, str(number))


@dataclass(frozen=True, slots=True)
class Page:
    """What one read returns: events after the cursor, the next cursor, and whether events
    between the cursor and the first one were lost (the ring or the stream was trimmed)."""

    events: list[Event]
    next: str
    truncated: bool = False


class EventBus:
    """A bounded, numbered ring of events with waiting readers."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        # the last events, numbered ``_last - len(_ring) + 1`` up to ``_last`` in order: an
        # ``Event``, or the row of one not read yet (``publish_many`` without subscribers)
        self._ring: deque[Event | EventFields] = deque(maxlen=capacity)
        self._last = 0
        self._changed = asyncio.Event()
        self._subscribers: list[Callable[[Event], None]] = []

    @property
    def last_id(self) -> str:
        """The id of the newest event ("0" before the first)."""
        return str(self._last)

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Call ``fn`` with every event published from now on (on the event loop)."""
        self._subscribers.append(fn)

    def publish(self, event: Event) -> Event:
        """Number the event, keep it, wake the readers; returns it with its id."""
        self._last += 1
        numbered = replace(event, id=str(self._last))
        self._keep(numbered)
        self._wake()
        return numbered

    def publish_many(self, rows: Iterable[EventFields]) -> None:
        """``publish`` for a batch (a commit's task events): numbered in order, the readers
        woken once for the batch. The rows are kept as given and made events when read,
        unless a subscriber needs each event now."""
        woke = self._last
        try:
            if self._subscribers:
                for row in rows:
                    self._last += 1
                    self._keep(_event(row, self._last))
            else:
                ring = self._ring
                for row in rows:
                    ring.append(row)
                    self._last += 1
        finally:
            if self._last != woke:
                self._wake()

    def _keep(self, numbered: Event) -> None:
        self._ring.append(numbered)
        for fn in self._subscribers:
            fn(numbered)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def read(self, since: str | None, timeout: float, limit: int) -> Page:
        """Events after ``since`` (None: from now), waiting up to ``timeout`` s for one."""
        after = self._last if since is None else _number(since)
        if not self._newer(after):
            waiter = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await waiter.wait()
        ring = self._ring
        oldest = self._last - len(ring) + 1      # the number of ring[0], if any
        start = max(0, after + 1 - oldest)
        events = [e if type(e) is Event else _event(e, number)  # type: ignore[arg-type]
                  for number, e in enumerate(itertools.islice(ring, start, start + limit),
                                             oldest + start)]
        truncated = after + 1 < oldest and after < self._last
        return Page(events, events[-1].id if events else str(max(after, 0)), truncated)

    def _newer(self, after: int) -> bool:
        return self._last > after


def _number(event_id: str) -> int:
    try:
        value = int(event_id)
    except ValueError:
        raise InvalidInput(f"event id {event_id!r}: this hub has no Redis, so its event ids "
                           "are whole numbers") from None
    if value < 0:
        raise InvalidInput(f"event id {event_id!r} must not be negative")
    return value
