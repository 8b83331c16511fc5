"""The hub's two background loops: placement cycles and the health monitor.

``PlacementLoop.cycle`` reads the queues in the order ``hub.queueing`` gives (priority
levels, weighted fair share, FIFO with bounded backfill; quota-held tasks skipped), asks the
scheduler about each task against the in-memory fleet view (no I/O on that path), reserves
what it places, commits the whole cycle in one store write and only then sends the PlaceTask
commands (a miss of a request shape is answered again, not decided, while the fleet has not
changed since: ``hub.placement.misses``); then lets the queueing layer preempt for tasks
that fit nowhere. It runs when woken (a submit, an inventory change, a released
reservation) and at least every ``placement_interval`` seconds. ``Monitor.tick`` advances
cluster health by elapsed time, fails tasks over from clusters that stayed NotReady past the
eviction timeout, and spills tasks a member has reported Unschedulable for too long over to
other clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from fuyao.spec import TaskState
from hub.activetask import ActiveTask, Command
from hub.auth.actor import SYSTEM, Actor
from hub.clusters import ClusterManager
from hub.config import Timings
from hub.dag import KIND_FAILED, KIND_HELD, Dependencies, Hold
from hub.division import Division
from hub.failover import Evictor
from hub.metrics import Metrics
from hub.placement.framework import PlacementRequest
from hub.placement.misses import Misses
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler
from hub.queueing import Queueing
from hub.queueing.cycle import Cycle
from hub.sessions import Sessions
from hub.taskbook import Staged, TaskBook

log = logging.getLogger(__name__)

MAX_TASKS_PER_CYCLE = 20_000   # of each queue
SETTLE_SECONDS = 0.02
PIPELINE_DEPTH = 2   # cycles in flight: one deciding while the one before commits
DUE_SLACK = 0.001  # a wake for a failover deadline lands this long after it (``tick``'s ">")
SLICE_SECONDS = 0.005  # a cycle decides this long at most, then lets the event loop run


@dataclass
class _Slice:
    """Decisions of one slice of a cycle, applied in memory, their commit queued."""

    staged: Staged
    # The tasks only, not their results: a result's score table reads the engine's rows
    # through a journal the engine keeps current while the result lives (``ShapeTable.lend``),
    # so thousands of slices waiting on their commits made every decision copy rows for them.
    placed: list[ActiveTask]
    decided_at: float


@dataclass
class _End:
    """A cycle's last word to its delivery: how it went."""

    decisions: int = 0
    slices: int = 0
    seconds: float = 0.0
    complete: bool = False      # False: it failed or was cancelled mid-way


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
        self._settle = False              # a wake since the last cycle asked for the settle
        self._lock = asyncio.Lock()       # decisions: one cycle at a time
        self._tail: asyncio.Future[None] | None = None   # the last cycle's delivery done
        self.last_slices = 0              # slices the last cycle decided in (tests)
        self.division = Division(tasks, self.poke)   # tasks divided across clusters
        self.misses = Misses(scheduler.fleet)   # misses answered again while the fleet stands

    def poke(self, settle: bool = True) -> None:
        """Ask for a cycle soon (something changed). ``settle=False``: new tasks were
        stored, nothing that a member's next message could complete; the cycle need not
        wait ``SETTLE_SECONDS`` for it (unless another wake asked)."""
        self._settle = self._settle or settle
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
                    async with asyncio.timeout(self.interval):
                        await self.wake.wait()
                # Let what woke it settle: a member frees a finished task's node (a delta)
                # just before it reports the task ended; a cycle between the two would still
                # count the task in its queue's use and hand the room by a stale fair share.
                # A submit alone does not wait: the fleet did not change (a timer's cycle
                # waits, as it always did).
                if self._settle or not self.wake.is_set():
                    await asyncio.sleep(SETTLE_SECONDS)
                self._settle = False
                self.wake.clear()
                while inflight and (inflight[0].done() or len(inflight) >= PIPELINE_DEPTH):
                    await _logged(inflight.popleft())
                inflight.append(asyncio.create_task(self.cycle()))
        finally:
            for task in inflight:
                task.cancel()

    async def cycle(self) -> int:
        """One placement cycle; returns how many tasks it placed, once their commands went
        out.

        Decisions take the decision lock and are made in slices of about
        ``SLICE_SECONDS``: each slice is applied in memory and its commit queued
        (``TaskBook.stage``; the writer merges slices queued while it is busy), then the
        cycle yields to the event loop, so heartbeats, reports and REST reads are served
        during a cycle of thousands of decisions. Each task is decided at most once per
        cycle, in the queueing layer's order; one that was cancelled, ended or re-queued
        while the cycle yielded is skipped. A slice's PlaceTask commands go out once its
        commit is durable, in slice order and after every earlier cycle's (``_deliver``),
        so the next cycle decides while this one's commits are in flight.
        """
        async with self._lock:
            started, cycle_at = time.perf_counter(), time.time()
            cycle = self.queueing.begin(limit=MAX_TASKS_PER_CYCLE)
            held: list[tuple[ActiveTask, Hold]] = []
            # Chained before anything can yield: deliveries keep cycle order.
            prev, done = self._tail, asyncio.get_running_loop().create_future()
            self._tail = done
            out: asyncio.Queue[_Slice | _End] = asyncio.Queue()
            delivery = asyncio.create_task(self._deliver(prev, done, out, cycle, held, cycle_at))
            end = _End()
            placed: list[tuple[ActiveTask, PlacementResult]] = []
            waiting: list[tuple[ActiveTask, PlacementResult]] = []
            staged_held = 0          # how much of cycle.held earlier slices staged
            try:
                slice_at = time.perf_counter()
                for task in cycle:
                    if time.perf_counter() - slice_at >= SLICE_SECONDS:
                        if placed or waiting or len(cycle.held) > staged_held:
                            end.decisions += len(placed) + len(waiting)
                            out.put_nowait(self._stage(placed, waiting,
                                                       cycle.held[staged_held:]))
                            staged_held = len(cycle.held)
                            placed, waiting = [], []
                            end.slices += 1
                        await asyncio.sleep(0)     # let the event loop serve the rest
                        slice_at = time.perf_counter()
                    if not self._placeable(task):
                        continue    # cancelled, ended or moved while the cycle yielded
                    self._decide_one(task, cycle, placed, waiting, held)
                self.division.top_up(cycle, self._decide, self._scheduler)
                self.queueing.finish(cycle)
                end.decisions += len(placed) + len(waiting)
                end.seconds = time.perf_counter() - started
                placed += await self.division.store()
                out.put_nowait(self._stage(placed, waiting, cycle.held[staged_held:]))
                end.slices += 1
                end.complete = True
            except asyncio.CancelledError:
                delivery.cancel()
                raise
            finally:
                out.put_nowait(end)     # what was staged is still delivered
        self.last_slices = end.slices
        return await delivery

    def _placeable(self, task: ActiveTask) -> bool:
        """Still queued and not being re-queued (it may have changed while a cycle yielded)."""
        return (task.state == TaskState.QUEUED and not task.saving
                and self.tasks.active.get(task.id) is task)

    def _decide_one(self, task: ActiveTask, cycle: Cycle,
                    placed: list[tuple[ActiveTask, PlacementResult]],
                    waiting: list[tuple[ActiveTask, PlacementResult]],
                    held: list[tuple[ActiveTask, Hold]]) -> None:
        """Decide one task of the cycle; reserve and record it in ``placed`` or ``waiting``
        (or ``held``: a dependency holds it)."""
        hold = self.deps.hold(task) if self.deps is not None else None
        if hold is not None:
            held.append((task, hold))
            return
        if self.division.divided(task):
            return      # its parts are placed as tasks of their own
        request = cycle.request(task)
        if request is None:
            return      # a queue quota holds it (cycle.held says which)
        scheduler = self._scheduler(task)
        decide = partial(self.misses.schedule, scheduler)
        request, result = cycle.decide(task, request, decide)
        if result.cluster is None and task.avoid:
            # Spill-over is a preference: with nowhere else to go, the clusters that could
            # not schedule it are candidates again (not excluded forever).
            task.avoid.clear()
            request, result = cycle.decide(task, cycle.request(task) or request, decide)
        if self.division.wants(task, result):
            missed = self.division.place(task, request, decide, scheduler, cycle)
            if missed is None:
                return      # divided: its parts are reserved, stored by the last slice
            result = missed
        if result.cluster is not None and not cycle.admit(task, result):
            return      # over a per-model or per-cluster quota there
        # Reserve at once, so the next decision in this cycle sees the capacity gone.
        if result.cluster is not None and scheduler.reserve(request, result).ok:
            placed.append((task, result))
            cycle.placed(task, result)
        else:
            waiting.append((task, result))
            cycle.missed(task, request, result)
        # Staged with its slice, after later decisions: read before they change the
        # engine's tables, it keeps no journal for them to copy rows into.
        result.read_now()

    def _stage(self, placed: list[tuple[ActiveTask, PlacementResult]],
               waiting: list[tuple[ActiveTask, PlacementResult]],
               held: list[tuple[ActiveTask, str]]) -> _Slice:
        """Apply one slice in memory and queue its commit."""
        return _Slice(self.tasks.stage(placed, waiting, held), [t for t, _ in placed],
                      time.time())

    async def _deliver(self, prev: asyncio.Future[None] | None, done: asyncio.Future[None],
                       out: asyncio.Queue[_Slice | _End], cycle: Cycle,
                       held: list[tuple[ActiveTask, Hold]], cycle_at: float) -> int:
        """Send each slice's PlaceTask commands once its commit is durable, after every
        earlier cycle finished its own; then what follows a cycle (divided tasks' settling,
        preemption, dependency holds, metrics). Returns how many tasks were sent."""
        sent = 0
        try:
            if prev is not None:
                await asyncio.wait([prev])
            while True:
                item = await out.get()
                if isinstance(item, _End):
                    break
                commands = await item.staged.durable()
                if commands:
                    self.metrics.stages.placed(
                        ((t.id, t.created_at.timestamp(), t.stored_at) for t in item.placed),
                        cycle_at, item.decided_at, time.time())
                elif item.placed:
                    self.poke()   # the commit failed: they are Queued again
                send_all(self.sessions, commands)
                sent += len(commands)
            if not item.complete:
                return sent       # the cycle failed: the loop logs its error
            send_all(self.sessions, await self.division.settle())
            send_all(self.sessions, await self.queueing.preempt(cycle))
            if held and await self._hold(held):
                self.poke()   # a failed task may fail its own dependents
            self.metrics.observe_cycle(item.decisions, sent, item.seconds)
            return sent
        finally:
            done.set_result(None)

    def _scheduler(self, task: ActiveTask) -> Scheduler:
        """The scheduler for the task's own score weights, if it has some."""
        weights = task.spec.score_weights
        return (self.variant(weights) if weights and self.variant is not None
                else self.scheduler)

    def _decide(self, task: ActiveTask) -> Callable[
            [PlacementRequest], tuple[PlacementRequest, PlacementResult]]:
        return partial(self.misses.schedule, self._scheduler(task))

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
            await asyncio.sleep(self.wait())
            try:
                await self.tick()
            except Exception:
                log.exception("monitor tick failed")

    def wait(self) -> float:
        """Seconds to the next tick: the monitor's interval, or less when a NotReady
        cluster falls due for failover sooner, so a lost member's tasks are re-queued at
        its grace rather than up to a whole interval after it."""
        now = time.monotonic()
        due = self.clusters.next_eviction(now)
        interval = self.timings.monitor_interval
        return interval if due is None else min(interval, due - now + DUE_SLACK)

    async def tick(self) -> None:
        """Advance health states; fail over and spill over what is due."""
        commands: list[Command] = []
        lost = await self.clusters.tick()
        self.evictor.forget_except(set(lost))
        for cluster in lost:
            commands += await self.fail_over(cluster)
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

    async def fail_over(self, cluster: str) -> list[Command]:
        """Re-queue the next batch of a lost cluster's tasks (``Evictor.evict``) and audit
        it; returns the commands to send (the caller sends them and pokes the placement
        loop)."""
        evicted = await self.evictor.evict(cluster)
        if evicted:
            await self.audit("cluster.failover", cluster,
                             f"ok, {len(evicted)} task(s) requeued: its lease expired "
                             "(NotReady past the eviction timeout)", SYSTEM)
        return evicted
