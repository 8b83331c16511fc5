"""The hub's two background loops: placement cycles and the health monitor.

``PlacementLoop.cycle`` reads the queues in the order ``hub.queueing`` gives (priority
levels, weighted fair share, FIFO with bounded backfill; quota-held tasks skipped), asks the
scheduler about each task against the in-memory fleet view (no I/O on that path), reserves
what it places, commits the whole cycle in one store write and only then sends the PlaceTask
commands; then lets the queueing layer preempt for tasks that fit nowhere. It runs when woken
(a submit, an inventory change, a released reservation) and at least every
``placement_interval`` seconds. ``Monitor.tick`` advances cluster health by elapsed time,
fails tasks over from clusters that stayed NotReady past the eviction timeout, and spills
tasks a member has reported Unschedulable for too long over to other clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

from hub.activetask import ActiveTask, Command
from hub.auth.actor import SYSTEM, Actor
from hub.clusters import ClusterManager
from hub.config import Timings
from hub.dag import KIND_FAILED, KIND_HELD, Dependencies, Hold
from hub.division import Division
from hub.failover import Evictor
from hub.metrics import Metrics
from hub.placement import memshare
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler
from hub.queueing import Queueing
from hub.sessions import Sessions
from hub.taskbook import TaskBook

log = logging.getLogger(__name__)

MAX_TASKS_PER_CYCLE = 20_000
SETTLE_SECONDS = 0.02
PIPELINE_DEPTH = 2   # cycles in flight: one deciding while the one before commits


async def _logged(cycle: asyncio.Task[int]) -> None:
    """Wait for a cycle; a bug must not stop placement for good."""
    try:
        await cycle
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("placement cycle failed")


def send_all(sessions: Sessions, commands: Sequence[Command]) -> None:
    """Send commands to the clusters' streams (dropped for a disconnected cluster)."""
    for cluster, msg in commands:
        sessions.send(cluster, msg)


class PlacementLoop:
    """Places queued tasks on clusters, one batched cycle at a time."""

    def __init__(self, tasks: TaskBook, scheduler: Scheduler, sessions: Sessions,
                 metrics: Metrics, interval: float, deps: Dependencies | None,
                 queueing: Queueing,
                 variant: Callable[[Mapping[str, float]], Scheduler] | None = None) -> None:
        self.tasks = tasks
        self.deps = deps
        self.queueing = queueing
        self.variant = variant   # the scheduler for a task's own score weights
        self.scheduler = scheduler
        self.sessions = sessions
        self.metrics = metrics
        self.interval = interval
        self.wake = asyncio.Event()
        self._lock = asyncio.Lock()       # decisions: one cycle at a time
        self._after = asyncio.Lock()      # commit, sends, preemption: in cycle order
        self.division = Division(tasks, self.poke)   # tasks divided across clusters

    def poke(self) -> None:
        """Ask for a cycle soon (something changed)."""
        self.wake.set()

    def deciding(self) -> bool:
        """True while a cycle is making its decisions (not while it waits for its commit)."""
        return self._lock.locked()

    async def run(self) -> None:
        """Cycle forever: when poked, and at least every ``interval`` seconds.

        Pipelined: a cycle is started while the one before may still wait for its commit
        (``PIPELINE_DEPTH`` cycles at most in flight); decisions stay one cycle at a time.
        """
        inflight: deque[asyncio.Task[int]] = deque()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=self.interval)
                # Let what woke it settle: a member frees a finished task's node (a delta)
                # just before it reports the task ended; a cycle between the two would still
                # count the task in its queue's use and hand the room by a stale fair share.
                await asyncio.sleep(SETTLE_SECONDS)
                self.wake.clear()
                while inflight and (inflight[0].done() or len(inflight) >= PIPELINE_DEPTH):
                    await _logged(inflight.popleft())
                inflight.append(asyncio.create_task(self.cycle()))
        finally:
            for task in inflight:
                task.cancel()

    async def cycle(self) -> int:
        """One placement cycle; returns how many tasks it placed, once their commands went
        out. Decisions take the decision lock; the commit, the sends and what follows run
        after it is released, in cycle order, so the next cycle decides meanwhile."""
        async with self._lock:
            started, cycle_at = time.perf_counter(), time.time()
            placed: list[tuple[ActiveTask, PlacementResult]] = []
            waiting: list[tuple[ActiveTask, PlacementResult]] = []
            held: list[tuple[ActiveTask, Hold]] = []
            cycle = self.queueing.begin(self.tasks.queued()[:MAX_TASKS_PER_CYCLE])
            for task in cycle:
                hold = self.deps.hold(task) if self.deps is not None else None
                if hold is not None:
                    held.append((task, hold))
                    continue
                if self.division.divided(task):
                    continue    # its parts are placed as tasks of their own
                request = cycle.request(task)
                if request is None:
                    continue    # a queue quota holds it (cycle.held says which)
                scheduler = self._scheduler(task)
                decide = partial(memshare.schedule, scheduler)
                request, result = cycle.decide(task, request, decide)
                if result.cluster is None and task.avoid:
                    # Spill-over is a preference: with nowhere else to go, the clusters that
                    # could not schedule it are candidates again (not excluded forever).
                    task.avoid.clear()
                    request, result = cycle.decide(task, cycle.request(task) or request,
                                                   decide)
                if self.division.wants(task, result):
                    missed = self.division.place(task, request, decide, scheduler, cycle)
                    if missed is None:
                        continue    # divided: its parts are reserved, stored below
                    result = missed
                if result.cluster is not None and not cycle.admit(task, result):
                    continue    # over a per-model or per-cluster quota there
                # Reserve at once, so the next decision in this cycle sees the capacity gone.
                if result.cluster is not None and scheduler.reserve(request, result).ok:
                    placed.append((task, result))
                    cycle.placed(task, result)
                else:
                    waiting.append((task, result))
                    cycle.missed(task, request, result)
            self.division.top_up(cycle, self._decide, self._scheduler)
            self.queueing.finish(cycle)
            decided, decided_at = time.perf_counter(), time.time()
            placed += await self.division.store()
            staged = self.tasks.stage(placed, waiting, cycle.held)
        # Taken before any later cycle can (it decides first): sends keep cycle order.
        await self._after.acquire()
        try:
            commands = await staged.durable()
            if commands:
                self.metrics.stages.placed(((t.id, t.created_at.timestamp()) for t, _ in placed),
                                           cycle_at, decided_at, time.time())
            elif placed:
                self.poke()   # the commit failed: they are Queued again
            send_all(self.sessions, commands)
            send_all(self.sessions, await self.division.settle())
            evictions = await self.queueing.preempt(cycle)
            send_all(self.sessions, evictions)
            if held and await self._hold(held):
                self.poke()   # a failed task may fail its own dependents
            self.metrics.observe_cycle(len(placed) + len(waiting), len(commands),
                                       decided - started)
            return len(commands)
        finally:
            self._after.release()

    def _scheduler(self, task: ActiveTask) -> Scheduler:
        """The scheduler for the task's own score weights, if it has some."""
        weights = task.spec.score_weights
        return (self.variant(weights) if weights and self.variant is not None
                else self.scheduler)

    def _decide(self, task: ActiveTask) -> Callable[
            [PlacementRequest], tuple[PlacementRequest, PlacementResult]]:
        return partial(memshare.schedule, self._scheduler(task))

    async def _hold(self, held: Sequence[tuple[ActiveTask, Hold]]) -> bool:
        """Say why held tasks wait; fail those whose dependency failed. True if any failed."""
        failed = False
        for task, hold in held:
            if hold.fail:
                await self.tasks.fail_waiting(task, KIND_FAILED, hold.reason)
                failed = True
            else:
                await self.tasks.note(task, KIND_HELD, hold.reason)
        return failed


Audit = Callable[[str, str, str, Actor], Awaitable[None]]


async def _no_audit(action: str, target: str, result: str, actor: Actor) -> None:
    return None


class Monitor:
    """Cluster health, failover and spill-over, on a timer; its decisions are audited as
    ``system``."""

    def __init__(self, clusters: ClusterManager, tasks: TaskBook, sessions: Sessions,
                 placement: PlacementLoop, timings: Timings, audit: Audit = _no_audit) -> None:
        self.audit = audit
        self.clusters = clusters
        self.tasks = tasks
        self.sessions = sessions
        self.placement = placement
        self.timings = timings
        self.evictor = Evictor(tasks, timings.eviction_rate, timings.monitor_interval)
        self._last_save = time.monotonic()

    async def run(self) -> None:
        """Tick forever."""
        while True:
            await asyncio.sleep(self.timings.monitor_interval)
            try:
                await self.tick()
            except Exception:
                log.exception("monitor tick failed")

    async def tick(self) -> None:
        """Advance health states; fail over and spill over what is due."""
        commands: list[Command] = []
        lost = await self.clusters.tick()
        self.evictor.forget_except(set(lost))
        for cluster in lost:
            evicted = await self.evictor.evict(cluster)
            if evicted:
                await self.audit("cluster.failover", cluster,
                                 f"ok, {len(evicted)} task(s) requeued: its lease expired "
                                 "(NotReady past the eviction timeout)", SYSTEM)
            commands += evicted
        for task in self.tasks.stuck_unschedulable(self.timings.unschedulable_timeout):
            cluster = task.cluster or "?"
            reason = (f"{cluster} could not schedule it for "
                      f"{self.timings.unschedulable_timeout:.0f}s: trying another cluster")
            commands += await self.tasks.requeue(task, reason, failover=False, avoid=cluster)
            await self.audit("task.requeue", task.name, f"ok, {reason}", SYSTEM)
        if commands:
            send_all(self.sessions, commands)
            self.placement.poke()
        if time.monotonic() - self._last_save > 10 * self.timings.monitor_interval:
            self._last_save = time.monotonic()
            await self.clusters.save_heartbeats()
