"""A standby's read cache: clusters and active tasks reloaded from the store.

A standby hub takes no agent streams and places nothing, but answers the REST reads
(clusters, tasks) with the same code as the leader, from the same in-memory structures,
which it reloads from the store when they are older than ``ttl`` seconds or when an event
says something changed (``invalidate``, called by the Redis event follower). The REST
middleware (``hub.api.replica``) calls ``refresh`` before each read; ``Hub.lead`` takes
``lock`` while it loads the state for real, so a refresh never interleaves with it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from hub.clusters import ClusterManager
from hub.taskbook import TaskBook

DEFAULT_TTL = 1.0


class ReadCache:
    """Reloads a standby's view of clusters and tasks on demand."""

    def __init__(self, clusters: ClusterManager, tasks: TaskBook,
                 *more: Callable[[], Awaitable[None]], ttl: float = DEFAULT_TTL) -> None:
        self.clusters = clusters
        self.tasks = tasks
        self.more = more        # other read-only loaders (profiles)
        self.ttl = ttl
        self.lock = asyncio.Lock()
        self.refreshes = 0
        self._fresh_at: float | None = None

    def invalidate(self) -> None:
        """The store changed: the next read reloads."""
        self._fresh_at = None

    def stale(self) -> bool:
        """True when the next read must reload first."""
        return self._fresh_at is None or time.monotonic() - self._fresh_at > self.ttl

    async def refresh(self) -> None:
        """Reload clusters and active tasks from the store if stale."""
        if not self.stale():
            return
        async with self.lock:
            if not self.stale():
                return
            started = time.monotonic()
            await self.clusters.load(persist=False)
            self.tasks.reset()
            await self.tasks.load()
            for load in self.more:
                await load()
            self._fresh_at = started
            self.refreshes += 1
