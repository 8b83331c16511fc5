"""The ``sim`` backend: a simulated member cluster (nodes, a scheduler, running tasks).

Built by ``member_agent.cli`` from a fleet file and driven by the connection through the
``Backend`` protocol. Each PlaceTask becomes a task copy keyed by (task id, generation): it
is ACCEPTED, bound by ``LocalScheduler`` (all replicas or none), reported BOUND then RUNNING,
and after ``duration_seconds x time_scale`` it SUCCEEDS (0 runs until cancelled). A copy no
node fits is reported UNSCHEDULABLE once and stays pending, retried whenever resources are
freed and every ``retry_interval`` seconds, as a pending pod would be; it reports BOUND
when it finally fits. Node changes are emitted before the task report they cause.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from fuyao.aio import cancel_and_wait
from fuyao.errors import FuyaoError, InvalidInput
from fuyao.fleetfile import Fleet
from fuyao.inventory import NodeInfo
from fuyao.nodebuild import build_node
from fuyao.nodescheduler import (
    Binding,
    LocalScheduler,
    NodeMatcher,
    Policy,
    Unfit,
)
from fuyao.selector import parse_selector
from fuyao.spec import TaskRequests
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import (
    EventSink,
    NodesChanged,
    Phase,
    TaskChanged,
    TaskStatus,
    now_ms,
    workload_name,
)

log = logging.getLogger(__name__)
RETAIN_FINISHED_SECONDS = 600.0


@dataclass(slots=True)
class _Copy:
    """One copy of a task in this member (mutable runtime record)."""

    task_id: str
    generation: int
    name: str
    order: int
    priority: int = 0
    duration: float = 0.0
    requests: TaskRequests | None = None
    selector: NodeMatcher | None = None
    phase: Phase = Phase.ACCEPTED
    node: str = ""
    reason: str = ""
    at_ms: int = 0
    bindings: tuple[Binding, ...] = ()
    restartable: bool = True        # failover restart-elsewhere: stopped when fenced
    timer: asyncio.TimerHandle | None = None
    finished_at: float | None = None

    def status(self) -> TaskStatus:
        return TaskStatus(
            self.task_id, self.generation, self.phase, self.node, self.reason, self.at_ms
        )


def requests_of(workload: pb.TaskWorkload) -> TaskRequests:
    """Per-replica requests of a wire workload, checked like a member would."""
    values = {
        "cpu_milli": workload.cpu_milli,
        "memory_mib": workload.memory_mib,
        "gpu_milli": workload.gpu_milli,
        "gpu_memory_mib": workload.gpu_memory_mib,
        "gpu_mem_mib": workload.gpu_mem_mib,
    }
    for key, value in values.items():
        if value < 0:
            raise InvalidInput(f"workload {key} {value} must not be negative")
    if workload.gpu_milli > 1000 and workload.gpu_milli % 1000:
        raise InvalidInput(
            f"workload gpu_milli {workload.gpu_milli}: more than one GPU must be whole"
        )
    return TaskRequests(replicas=max(1, workload.replicas), **values)


class SimBackend:
    """A simulated member cluster built from a fleet."""

    name = "sim"

    def __init__(
        self,
        fleet: Fleet,
        *,
        time_scale: float = 1.0,
        policy: Policy = Policy.BEST_FIT,
        retry_interval: float = 2.0,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self._fleet = fleet
        self._time_scale = time_scale
        self._retry_interval = retry_interval
        self._scheduler = LocalScheduler(
            [
                build_node(
                    n.name, n.labels, n.allocatable, unschedulable=n.unschedulable,
                    overrides=overrides,
                )
                for n in fleet.nodes
            ],
            policy,
        )
        self._copies: dict[str, dict[int, _Copy]] = {}
        # (finished_at, task id, generation) in the order copies finished: pruning looks
        # only at the oldest (it scanned every copy on every place, O(n^2) for n copies).
        self._finished: deque[tuple[float, str, int]] = deque()
        self._pending: list[_Copy] = []
        self._order = itertools.count()
        self._sink: EventSink = lambda event: None
        self._retry_task: asyncio.Task[None] | None = None

    def cluster_labels(self) -> dict[str, str]:
        """The fleet file's ``cluster.labels``."""
        return dict(self._fleet.cluster_labels)

    async def start(self, sink: EventSink) -> None:
        """Begin emitting events and retrying pending copies."""
        self._sink = sink
        if self._retry_task is None:
            self._retry_task = asyncio.create_task(self._retry_loop(), name="sim-retry")

    async def stop(self) -> None:
        """Stop the retry loop and every run timer."""
        if self._retry_task is not None:
            await cancel_and_wait([self._retry_task])
            self._retry_task = None
        for copy in self._all_copies():
            if copy.timer is not None:
                copy.timer.cancel()

    def nodes(self) -> list[NodeInfo]:
        """Every simulated node as it stands."""
        return self._scheduler.nodes()

    def tasks(self) -> list[TaskStatus]:
        """Live copies and copies that finished in the last ten minutes."""
        self._prune()
        return [c.status() for c in sorted(self._all_copies(), key=lambda c: c.order)]

    async def place(self, command: pb.PlaceTask, *, fenced: str = "") -> None:
        """Create a task copy; the same id + generation twice is a no-op. ``fenced``: the
        member's lease has expired, so a restartable copy is refused with that reason."""
        task_id, generation = command.task_id, command.generation
        self._prune()
        copies = self._copies.setdefault(task_id, {})
        if generation in copies:
            log.debug("task %s generation %d already placed: no-op", task_id, generation)
            return
        copy = _Copy(
            task_id,
            generation,
            command.name or workload_name(task_id, generation),
            next(self._order),
            priority=command.workload.priority,
            duration=command.workload.duration_seconds,
            restartable=command.workload.failover != "never",
        )
        copies[generation] = copy
        if fenced and copy.restartable:
            self._set(copy, Phase.CANCELLED, reason=fenced)
            return
        newest = max(copies)
        if newest > generation:
            self._set(copy, Phase.CANCELLED, reason=f"stale: generation {newest} already placed")
            return
        freed = False
        for old in sorted(copies.values(), key=lambda c: c.generation):
            if old.generation < generation and not old.phase.terminal:
                freed |= self._stop(old, f"superseded by generation {generation}")
        try:
            copy.requests = requests_of(command.workload)
            copy.selector = parse_selector(command.workload.selector)
        except FuyaoError as exc:
            self._set(copy, Phase.FAILED, reason=exc.message)
            return
        self._set(copy, Phase.ACCEPTED)
        if freed:
            self._retry_pending()
        self._try_bind(copy)

    async def cancel(self, task_id: str, generation: int, reason: str = "",
                     grace_seconds: int = 0) -> None:
        """Cancel every live copy of the task with this generation or older; with a grace
        period a running copy keeps its resources that long (it is terminating, so it does
        not finish meanwhile), then stops. A cancel without grace stops it at once."""
        hits = [
            c
            for c in self._copies.get(task_id, {}).values()
            if c.generation <= generation and not c.phase.terminal
        ]
        if not hits:
            log.debug("cancel %s <= g%d: no live copy", task_id, generation)
        freed = False
        why = reason or "cancelled by the hub"
        for copy in sorted(hits, key=lambda c: c.generation):
            if grace_seconds > 0 and copy.phase is Phase.RUNNING and copy.bindings:
                if copy.timer is not None:
                    copy.timer.cancel()
                copy.timer = asyncio.get_running_loop().call_later(
                    grace_seconds * self._time_scale, self._stop_later, copy, why)
                continue
            freed |= self._stop(copy, why)
        if freed:
            self._retry_pending()

    def stop_restartable(self, reason: str) -> int:
        """Stop every live copy of a restart-elsewhere task (the lease expired); how many."""
        hits = [c for c in self._all_copies() if c.restartable and not c.phase.terminal]
        freed = False
        for copy in sorted(hits, key=lambda c: c.order):
            freed |= self._stop(copy, reason)
        if freed:
            self._retry_pending()
        return len(hits)

    # --- internals -----------------------------------------------------------------

    def _all_copies(self) -> list[_Copy]:
        return [c for gens in self._copies.values() for c in gens.values()]

    def _set(self, copy: _Copy, phase: Phase, *, node: str = "", reason: str = "") -> None:
        copy.phase, copy.node, copy.reason, copy.at_ms = phase, node, reason, now_ms()
        if phase.terminal:
            copy.finished_at = time.monotonic()
            self._finished.append((copy.finished_at, copy.task_id, copy.generation))
        self._sink(TaskChanged(copy.status()))

    def _emit_nodes(self, bindings: tuple[Binding, ...]) -> None:
        names = sorted({b.node for b in bindings})
        self._sink(NodesChanged(upserted=tuple(self._scheduler.node(n) for n in names)))

    def _try_bind(self, copy: _Copy) -> bool:
        assert copy.requests is not None and copy.selector is not None
        outcome = self._scheduler.schedule(copy.requests, copy.selector)
        if isinstance(outcome, Unfit):
            if copy.phase is not Phase.UNSCHEDULABLE:
                self._set(copy, Phase.UNSCHEDULABLE, reason=outcome.reason)
                self._pending.append(copy)
            copy.reason = outcome.reason
            return False
        copy.bindings = outcome
        node = ",".join(sorted({b.node for b in outcome}))
        self._emit_nodes(outcome)
        self._set(copy, Phase.BOUND, node=node)
        self._set(copy, Phase.RUNNING, node=node)
        if copy.duration > 0:
            delay = copy.duration * self._time_scale
            key = (copy.task_id, copy.generation)
            copy.timer = asyncio.get_running_loop().call_later(delay, self._finish, key)
        return True

    def _finish(self, key: tuple[str, int]) -> None:
        copy = self._copies.get(key[0], {}).get(key[1])
        if copy is None or copy.phase is not Phase.RUNNING:
            return
        copy.timer = None
        released = self._release(copy)
        self._set(copy, Phase.SUCCEEDED, node=copy.node)
        if released:
            self._retry_pending()

    def _stop_later(self, copy: _Copy, reason: str) -> None:
        """A grace period ended: stop the copy if it still runs."""
        copy.timer = None
        if not copy.phase.terminal and self._stop(copy, reason):
            self._retry_pending()

    def _stop(self, copy: _Copy, reason: str) -> bool:
        """Cancel a live copy; True if that freed resources."""
        if copy.timer is not None:
            copy.timer.cancel()
            copy.timer = None
        if copy in self._pending:
            self._pending.remove(copy)
        freed = self._release(copy)
        self._set(copy, Phase.CANCELLED, node=copy.node, reason=reason)
        return freed

    def _release(self, copy: _Copy) -> bool:
        """Free the copy's bindings and emit the node change; False if it held nothing."""
        if not copy.bindings:
            return False
        bindings, copy.bindings = copy.bindings, ()
        self._scheduler.release(bindings)
        self._emit_nodes(bindings)
        return True

    def _retry_pending(self) -> None:
        """Try pending copies in priority order, then arrival order."""
        for copy in sorted(self._pending, key=lambda c: (-c.priority, c.order)):
            if self._try_bind(copy):
                self._pending.remove(copy)

    async def _retry_loop(self) -> None:
        while True:
            await asyncio.sleep(self._retry_interval)
            if self._pending:
                self._retry_pending()

    def _prune(self) -> None:
        """Forget copies that finished more than ``RETAIN_FINISHED_SECONDS`` ago."""
        cutoff = time.monotonic() - RETAIN_FINISHED_SECONDS
        finished = self._finished
        while finished and finished[0][0] < cutoff:
            _, task_id, generation = finished.popleft()
            gens = self._copies.get(task_id)
            copy = gens.get(generation) if gens is not None else None
            if copy is None or copy.finished_at is None or copy.finished_at >= cutoff:
                continue     # gone already, or finished again later (a later entry)
            del gens[generation]   # type: ignore[union-attr]
            if not gens:
                del self._copies[task_id]
