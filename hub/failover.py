"""Failover of a lost cluster's tasks: the policy per task and the eviction rate limit.

Called by ``hub.loops.Monitor.tick`` for every cluster ``ClusterManager.tick`` found due
(NotReady past the eviction timeout *and* silent for longer than the member lease plus the
safety margin, on the hub's own clock: by then the member has stopped its restartable
copies itself). ``Evictor.evict`` re-queues the cluster's ``restart-elsewhere`` tasks,
highest priority first, at most ``eviction_rate`` tasks per second per lost cluster (a
token bucket holding one second's worth and starting full, so a large outage does not
stampede the survivors, while a small one moves in one tick); the re-queued tasks may
use the survivors' headroom. ``failover: never`` tasks stay where they are, waiting for
the cluster to come back.
"""

from __future__ import annotations

import logging
import time

from fuyao.spec import FAILOVER_NEVER
from hub.activetask import ActiveTask, Command
from hub.taskbook import TaskBook

log = logging.getLogger(__name__)


class Evictor:
    """Re-queues lost clusters' tasks at a bounded rate."""

    def __init__(self, tasks: TaskBook, rate: float, interval: float) -> None:
        self.tasks = tasks
        self.rate = rate              # tasks per second per lost cluster
        self.interval = interval      # the monitor's tick, the bucket's smallest refill
        self._credit: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def budget(self, cluster: str, now: float | None = None) -> int:
        """How many of ``cluster``'s tasks may be re-queued now (and spend them)."""
        now = time.monotonic() if now is None else now
        last = self._last.get(cluster)
        cap = self.rate * max(self.interval, 1.0)    # at most one second's worth at once
        # The bucket starts full: an outage's first second's worth moves in the first tick
        # (one store write, one placement cycle), then ``rate`` per second. Over any
        # ``t`` seconds at most ``rate * (1 + t)`` tasks move.
        refill = cap if last is None else min(cap, self.rate * max(0.0, now - last))
        credit = self._credit.get(cluster, 0.0) + refill
        spend = int(credit)
        self._credit[cluster] = credit - spend
        self._last[cluster] = now
        return spend

    def forget_except(self, lost: set[str]) -> None:
        """Drop the buckets of clusters no longer lost (a later outage starts afresh)."""
        for name in [n for n in self._last if n not in lost]:
            self._last.pop(name, None)
            self._credit.pop(name, None)

    async def evict(self, cluster: str) -> list[Command]:
        """Re-queue the next batch of ``cluster``'s restartable tasks."""
        movable = restartable(self.tasks.on_cluster(cluster))
        if not movable:
            return []
        batch = sorted(movable, key=lambda t: (-t.priority, t.seq))[:self.budget(cluster)]
        if batch:
            log.warning("cluster %s lost: re-placing %d of %d tasks (at most %.0f/s)",
                        cluster, len(batch), len(movable), self.rate)
        reason = f"cluster {cluster} is lost (its lease expired): failing over"
        # One store write for the whole batch; if it fails, none moved and the next tick
        # tries again (the budget it spent is not given back: the rate stays a bound).
        try:
            return await self.tasks.requeue_many(batch, reason, failover=True)
        except Exception as exc:
            log.warning("cluster %s: failover write of %d tasks failed (retried next tick): "
                        "%s", cluster, len(batch), exc)
            return []


def restartable(tasks: list[ActiveTask]) -> list[ActiveTask]:
    """The tasks a lost cluster's failover may move (not ``failover: never``)."""
    return [t for t in tasks if t.spec.failover != FAILOVER_NEVER]
