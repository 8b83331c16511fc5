"""Task and cluster events on a Redis stream: publisher, reader, and replica follower.

Used by ``EventHub`` when the hub runs with ``--redis URL``. The publisher drains a bounded
in-memory queue into ``XADD fuyao:events MAXLEN ~ 100000`` in batches; while Redis is down
the queue keeps filling (up to ``PENDING_MAX`` events, the oldest dropped and counted beyond
that), the hub keeps placing, ``/readyz`` says ``degraded`` and ``fuyao_redis_up`` is 0;
when Redis returns the queue is published in order (caught up). ``read`` serves watchers on
any replica with ``XREAD BLOCK``; ``follow`` tells a replica that something changed (its
read cache is dropped). Redis errors are turned into ``Transient`` here, at the boundary.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import Counter, Gauge
from redis.exceptions import RedisError

from fuyao.errors import InvalidInput, Transient
from hub.events.bus import Event, Page
from hub.metrics import Metrics

log = logging.getLogger(__name__)

STREAM = "fuyao:events"
MAXLEN = 100_000          # approximate: Redis trims whole macro nodes
PENDING_MAX = 100_000     # events kept while Redis is down
BATCH = 500
RETRY_MAX = 5.0


def check_redis_url(url: str) -> str:
    """``redis://`` / ``rediss://`` / ``unix://`` URLs only (InvalidInput otherwise)."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise InvalidInput(f"--redis {url!r} must be a redis://HOST:PORT/DB URL")
    return url


class RedisStream:
    """One hub's connection to the events stream."""

    def __init__(self, url: str, metrics: Metrics) -> None:
        self.url = check_redis_url(url)
        self.client: aioredis.Redis = aioredis.Redis.from_url(
            # Reads block up to 30 s (a watcher's long poll): the socket must wait longer.
            url, socket_timeout=40, socket_connect_timeout=2, decode_responses=True)
        self.up = False
        self.last_error: str | None = None
        self._pending: deque[Event] = deque()
        self._wake = asyncio.Event()
        self._up = Gauge("fuyao_redis_up", "1 when the last Redis call worked, else 0",
                         registry=metrics.registry)
        self._pending_gauge = Gauge("fuyao_events_pending",
                                    "Events waiting to be published to Redis",
                                    registry=metrics.registry)
        self._published = Counter("fuyao_events_published", "Events published to Redis",
                                  registry=metrics.registry)
        self._dropped = Counter("fuyao_events_dropped",
                                "Events dropped because Redis stayed down too long",
                                registry=metrics.registry)
        self._pending_gauge.set_function(lambda: len(self._pending))

    # -- publishing ------------------------------------------------------------------------

    def enqueue(self, event: Event) -> None:
        """Queue an event for Redis (never blocks; drops the oldest beyond ``PENDING_MAX``)."""
        if len(self._pending) >= PENDING_MAX:
            self._pending.popleft()
            self._dropped.inc()
        self._pending.append(event)
        self._wake.set()

    async def publish_forever(self) -> None:
        """Drain the queue into the stream, in order, retrying while Redis is down."""
        delay = 0.2
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
            batch = [self._pending[i] for i in range(min(BATCH, len(self._pending)))]
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    for event in batch:
                        pipe.xadd(STREAM, {"event": json.dumps(event.to_dict())},
                                  maxlen=MAXLEN, approximate=True)
                    await pipe.execute()
            except (RedisError, OSError) as exc:
                self._down(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            for _ in batch:
                self._pending.popleft()
            self._published.inc(len(batch))
            self._set_up()
            delay = 0.2

    # -- reading ---------------------------------------------------------------------------

    async def read(self, since: str | None, timeout: float, limit: int) -> Page:
        """Events after the stream id ``since`` (None: from now), waiting up to ``timeout``."""
        if since is not None:
            _split(since)       # a malformed id is the caller's error (400), not Redis' (503)
        try:
            after = since if since is not None else await self._last_id()
            found: Any = await self.client.xread({STREAM: after}, count=limit,
                                            block=max(1, int(timeout * 1000)))
            oldest: str | None = None
            if since is not None and since != "0-0":
                first: Any = await self.client.xrange(STREAM, count=1)
                oldest = str(first[0][0]) if first else None
        except (RedisError, OSError) as exc:
            self._down(exc)
            raise Transient(f"the event stream (Redis) is unavailable: {exc}") from exc
        self._set_up()
        entries: list[tuple[str, dict[str, str]]] = found[0][1] if found else []
        events = [Event.from_dict(json.loads(fields["event"]), entry_id)
                  for entry_id, fields in entries]
        truncated = oldest is not None and _before(after, oldest) and not _adjacent(after, oldest)
        return Page(events, events[-1].id if events else after, truncated)

    async def follow(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` whenever the stream grows (a replica's cache invalidation)."""
        after = "$"
        await self.ping()
        while True:
            try:
                grown: Any = await self.client.xread({STREAM: after}, count=BATCH, block=5000)
                self._set_up()
            except (RedisError, OSError) as exc:
                self._down(exc)
                changed()           # while blind, the cache must not be trusted
                await asyncio.sleep(1.0)
                after = "$"
                continue
            if grown:
                after = str(grown[0][1][-1][0])
                changed()

    async def ping(self) -> bool:
        """True if Redis answers now."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as exc:
            self._down(exc)
            return False
        self._set_up()
        return True

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()

    def status(self) -> dict[str, Any]:
        """For ``/readyz``: up or down, and how many events wait."""
        return {"up": self.up, "pending": len(self._pending), "error": self.last_error}

    # -- internals -------------------------------------------------------------------------

    async def _last_id(self) -> str:
        last: Any = await self.client.xrevrange(STREAM, count=1)
        return str(last[0][0]) if last else "0-0"

    def _down(self, exc: BaseException) -> None:
        if self.up or self.last_error is None:
            log.warning("Redis is unavailable: %s (events wait in memory)", exc)
        self.up = False
        self.last_error = str(exc) or type(exc).__name__
        self._up.set(0)

    def _set_up(self) -> None:
        if not self.up:
            log.info("Redis is available")
        self.up = True
        self.last_error = None
        self._up.set(1)


def _split(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        raise InvalidInput(f"event id {stream_id!r} is not a Redis stream id (MS-SEQ)") from None


def _before(a: str, b: str) -> bool:
    return _split(a) < _split(b)


def _adjacent(a: str, b: str) -> bool:
    """True when nothing can lie strictly between stream ids a and b."""
    ams, aseq = _split(a)
    return (ams, aseq + 1) == _split(b)

