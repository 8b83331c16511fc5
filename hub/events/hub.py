"""``EventHub``: where the hub's task and cluster events are turned into watchable events.

Created by ``Hub``; ``attach`` hooks it to the store (every committed task event, told from
the writer thread, so an event is published only once it is durable) and to the cluster
manager (state changes, cordons, joins, removals). Each event is numbered on the in-process
``EventBus`` and, with Redis, queued for the stream. ``read`` is what the events endpoint
calls: the Redis stream when configured (the same ids on every replica), else the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.exceptions import RedisError

from hub.clusters import ClusterManager, utcnow
from hub.events.bus import Event, EventBus, Page
from hub.events.redis_stream import RedisStream
from hub.metrics import Metrics
from hub.store import EventRecord, Store
from hub.taskbook import TaskBook

CLOSE_WITHIN = 2.0


class EventHub:
    """The hub's events: bus, optional Redis stream, readers."""

    def __init__(self, redis_url: str | None, metrics: Metrics, tasks: TaskBook,
                 invalidate: Callable[[], None]) -> None:
        self.bus = EventBus()
        self.redis = RedisStream(redis_url, metrics) if redis_url else None
        if self.redis is not None:
            self.bus.subscribe(self.redis.enqueue)
        self.tasks = tasks
        self.invalidate = invalidate        # a replica's read cache, dropped on any event
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def attach(self, store: Store, clusters: ClusterManager) -> None:
        """Hear every committed task event and every cluster change."""
        store.on_events = self._committed
        clusters.on_change = self.cluster_changed

    def start(self) -> None:
        """Start publishing to Redis and following it (nothing to start without Redis)."""
        self._loop = asyncio.get_running_loop()
        if self.redis is not None:
            self._tasks = [
                asyncio.create_task(self.redis.publish_forever(), name="events-publish"),
                asyncio.create_task(self.redis.follow(self.invalidate), name="events-follow")]

    async def close(self) -> None:
        """Stop the Redis loops and close the connections, in bounded time (a read blocked
        in the Redis client must not hold up the hub's shutdown)."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CLOSE_WITHIN)
        if self.redis is not None:
            with contextlib.suppress(TimeoutError, RedisError, OSError):
                async with asyncio.timeout(CLOSE_WITHIN):
                    await self.redis.close()

    async def read(self, since: str | None, timeout: float, limit: int) -> Page:
        """Events after ``since`` from the Redis stream if configured, else from the bus."""
        if self.redis is not None:
            return await self.redis.read(since, timeout, limit)
        return await self.bus.read(since, timeout, limit)

    def cluster_changed(self, name: str, kind: str, message: str) -> None:
        """A cluster event (on the event loop)."""
        self.bus.publish(Event("cluster", name, kind, message, utcnow().isoformat()))

    def readiness(self) -> dict[str, Any]:
        """``{"redis": "off" | "ok" | "down", ...}`` for ``/readyz``."""
        if self.redis is None:
            return {"redis": "off"}
        status = self.redis.status()
        return {"redis": "ok" if status["up"] else "down",
                "events_pending": status["pending"], "redis_error": status["error"]}

    def _committed(self, events: Sequence[EventRecord], names: Mapping[str, str]) -> None:
        """From the store's writer thread, after the commit."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._publish, list(events), dict(names))

    def _publish(self, events: list[EventRecord], names: dict[str, str]) -> None:
        self.bus.publish_many(("task", self._name(e.task_id, names), e.kind, e.message,
                               e.at, e.cluster, e.generation, e.task_id)
                              for e in events)

    def _name(self, task_id: str, names: dict[str, str]) -> str:
        task = self.tasks.active.get(task_id)
        return names.get(task_id) or (task.name if task is not None else task_id)
