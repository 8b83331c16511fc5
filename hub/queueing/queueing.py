"""``Queueing``: the hub's queueing layer, between the REST API and placement.

The hub (``hub.core``) builds one and the placement loop (``hub.loops``) asks it, every
cycle, for the order to try queued tasks in (``begin`` -> ``hub.queueing.cycle.Cycle``),
then lets it ``finish`` the cycle and ``preempt`` for tasks that fit nowhere. Everything it
needs per decision is in memory: queue settings (``QueueBook``), each queue's use (kept by
``ledger.Ledger``, re-charged once per cycle only for the tasks whose placement changed: a
compare per active task per cycle, O(log queues) per decision), cluster holds for backfill
and preemption. The REST router (``hub.api.queues``) calls ``create``/``update``/``delete``/
``view``/``views``; the hub's task views call ``hold_for``. The pieces live beside it:
``config`` (knobs), ``book`` (the queues, stored), ``quota`` (the rules), ``ledger`` (the
use), ``cycle`` (one cycle's order), ``eviction`` and ``preempt`` (preemption), ``views``
(what users see).
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable, Sequence
from typing import Any

from fuyao.errors import InvalidInput
from fuyao.queues import QueueSpec, QueueUpdate, QueueView
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, Command
from hub.fleet import FleetView
from hub.placement.framework import PlacementRequest
from hub.placement.profile import Profile
from hub.queueing.book import QueueBook
from hub.queueing.config import QueueingConfig
from hub.queueing.cycle import Cycle, Hold, Rank, _Lane
from hub.queueing.eviction import Preemption
from hub.queueing.ledger import Ledger, copy_usage
from hub.queueing.parking import Parking
from hub.queueing.preempt import Planner
from hub.queueing.quota import QueueState, Usage, Vector, demand
from hub.queueing.views import queue_view, task_hold, task_place
from hub.taskbook import TaskBook

MODELS_SLACK = 1024   # ended tasks' device models kept beyond the active tasks' count

__all__ = ["Queueing", "QueueingConfig"]


class Queueing:
    """Queues, their use and fair share, backfill holds, preemption."""

    def __init__(self, tasks: TaskBook, fleet: FleetView, profile: Profile, *,
                 headroom_priority: int, config: QueueingConfig | None = None) -> None:
        self.tasks = tasks
        self.fleet = fleet
        self.config = config or QueueingConfig()
        self.book = QueueBook(tasks.writer)
        self.reserved: dict[str, Hold] = {}          # cluster -> who holds it
        self.blocked: dict[str, int] = {}            # queue heads: cycles fit nowhere
        self.models: dict[str, str | None] = {}      # admitted task -> device model
        self.holds: dict[str, str] = {}
        self.usage = Usage()                         # this cycle's (charged as it places)
        self.ledger = Ledger()                       # the admitted tasks' (between cycles)
        self.planner = Planner(fleet, profile, headroom_priority, self.models)
        self.preemption = Preemption(self)
        self.parking = Parking(fleet, self.planner.fits_empty, tasks.active)

    # -- queues -------------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the queues (``default`` is created if missing)."""
        await self.book.load()

    def states(self) -> Iterable[QueueState]:
        """Every queue's settings."""
        return self.book.states.values()

    def check_submit(self, specs: Sequence[TaskSpec]) -> None:
        """InvalidInput naming every queue the specs name that does not exist."""
        missing = sorted({s.queue for s in specs} - set(self.book.records))
        if missing:
            raise InvalidInput(f"queue(s) not found: {', '.join(missing)} (nothing was stored; "
                               f"queues: {', '.join(sorted(self.book.records))})")

    async def create(self, spec: QueueSpec) -> QueueView:
        """A new queue."""
        return self.view((await self.book.create(spec)).name)

    async def update(self, name: str, change: QueueUpdate) -> QueueView:
        """Change a queue; the next cycle uses the new settings."""
        return self.view((await self.book.update(name, change)).name)

    async def delete(self, name: str) -> None:
        """Delete a queue with no active task (Conflict names them)."""
        names = [t.name for t in sorted(self.tasks.active.values(), key=lambda t: t.seq)
                 if t.queue == name]
        await self.book.delete(name, names)

    def views(self) -> list[QueueView]:
        """Every queue, by name."""
        usage = self._usage()
        return [queue_view(self, rec, usage) for _, rec in sorted(self.book.records.items())]

    def view(self, name: str) -> QueueView:
        """One queue: settings, use against quota, dominant and fair share now."""
        return queue_view(self, self.book.get(name), self._usage())

    def hold_for(self, task: ActiveTask) -> dict[str, Any] | None:
        """The queue and quota state of a queued task (``task explain``, ``task describe``;
        shape in ``hub.queueing.views.task_hold``), None when it is not Queued."""
        return task_hold(self, task)

    def place_of(self, task: ActiveTask) -> tuple[int | None, str | None] | None:
        """A queued task's position in its queue and the hold on it, if any (what a task
        view shows: ``hub.queueing.views.task_place``), None when it is not Queued."""
        return task_place(self, task)

    # -- use ----------------------------------------------------------------------------------

    def totals(self) -> Vector:
        """The fleet's cpu, memory and gpu (all models) allocatable: DRF's denominators."""
        out: Vector = {"cpu": 0, "memory": 0, "gpu": 0}
        for cluster in self.fleet.ordered:
            for model, row in cluster.totals().items():
                out["cpu"] += row.cpu_total
                out["memory"] += row.mem_total
                out["gpu"] += row.devices * 1000 if model != "none" else 0
        return out

    def _usage(self) -> Usage:
        """The admitted tasks' use now (the ledger's own: read it, do not charge it)."""
        return self.ledger.sync(self.tasks.active, self.need_of)

    def need_of(self, task: ActiveTask) -> Vector:
        """What an admitted task uses, with the device model it was placed on."""
        return demand(task.requests(), self._model(task))

    def demand_of(self, task_id: str) -> Vector:
        """What an admitted task is charged this cycle (empty if it is not)."""
        return self.ledger.need(task_id)

    def uncharge(self, task: ActiveTask, cluster: str) -> None:
        """A task left its cluster (preempted): its queue's use drops at once."""
        self.usage.charge(task.queue, cluster, self.ledger.drop(task.id), -1)

    def _model(self, task: ActiveTask) -> str | None:
        """The device model an admitted task uses: as placed, or as its node reports."""
        if task.id in self.models:
            return self.models[task.id]
        held = self.fleet.reservation(task.id)
        model = held.model if held is not None else None
        cluster = self.fleet.cluster(task.cluster) if task.cluster else None
        if model is None and cluster is not None and task.node:
            node = cluster.node(task.node.split(",")[0])
            if node is not None and node.info.devices:
                model = node.info.devices[0].model
        self.models[task.id] = model
        return model

    # -- a placement cycle --------------------------------------------------------------------

    def begin(self, queued: Sequence[ActiveTask] | None = None,
              limit: int | None = None) -> Cycle:
        """This cycle's order: each queue's tasks not parked (``hub.queueing.parking``), at
        most ``limit`` of each, as the task book keeps them (``TaskBook.lanes``) - or, for
        tests and benches, ``queued`` (sorted by priority, then age) split by queue."""
        self.parking.refresh()
        groups: dict[str, list[ActiveTask]]
        if queued is None:
            groups = self.tasks.lanes()
        else:
            groups = {}
            for task in self.parking.waiting(queued):
                groups.setdefault(task.queue, []).append(task)
        lanes: dict[str, _Lane] = {}
        for queue, tasks in groups.items():
            state = self.book.states.get(queue) or QueueState(queue)
            lanes[queue] = _Lane(state, tasks if limit is None else tasks[:limit])
        if self.reserved or self.preemption.tracking:
            self._prune(_Waiting(self))
        self._forget_models()
        self.usage = copy_usage(self._usage())
        return Cycle(self, lanes, self.usage, self.totals(),
                     [c.name for c in self.fleet.ordered])

    def _forget_models(self) -> None:
        """Drop the device models of tasks no longer active, once those may outnumber the
        active tasks by ``MODELS_SLACK``: only active tasks' ids are ever looked up, so
        ended ones may stay a while. Scanning every entry each cycle cost
        0.24 ms a cycle at 5,000 active tasks; now a scan is paid for by as many ended tasks
        as it finds (``docs/benchmarks.md``, e2e section, "Twenty-fifth pass")."""
        active = self.tasks.active
        if len(self.models) <= 2 * len(active) + MODELS_SLACK:
            return
        for task_id in [t for t in self.models if t not in active]:
            del self.models[task_id]

    def _prune(self, waiting: Container[str]) -> None:
        """Forget the holds and preemptions of tasks no longer waiting to be placed (placed,
        ended, cancelled or parked) and the holds that lapsed."""
        now = time.monotonic()
        for cluster, hold in list(self.reserved.items()):
            if hold.until < now or hold.task_id not in waiting:
                del self.reserved[cluster]
        self.preemption.prune(waiting)

    def finish(self, cycle: Cycle) -> None:
        """Keep what the cycle learnt: quota holds, blocked heads. (The queue positions are
        the task map's, kept as tasks come and go: numbering them at the end of every cycle,
        read or not, cost more than the cycle's decisions with tens of thousands of tasks
        queued: docs/benchmarks.md, "A backlog".) The tasks it parked leave the lanes."""
        self.holds, self.blocked = cycle.holds, cycle.heads
        self.parking.flush()

    def hold_cluster(self, cluster: str, task: ActiveTask, rank: Rank, kind: str) -> None:
        """Keep ``cluster`` for ``task`` (unless a higher-ranked task holds it)."""
        held = self.reserved.get(cluster)
        if held is not None and held.task_id != task.id and held.rank >= rank:
            return
        if held is not None and held.task_id == task.id and held.kind == kind:
            return
        for other in [c for c, h in self.reserved.items() if h.task_id == task.id]:
            del self.reserved[other]
        until = time.monotonic() + self.config.reservation_seconds
        self.reserved[cluster] = Hold(task.id, task.name, rank, kind, until)

    def could_ever_fit(self, cluster: str, request: PlacementRequest) -> bool:
        """Would ``request`` fit ``cluster`` with nothing running there? Asked before backfill
        keeps a cluster for a blocked head (never for one it can never fit); the answer is
        kept per request shape while the cluster's capacity and settings stand
        (``Parking.could_fit``)."""
        info = self.fleet.cluster(cluster)
        return info is not None and self.parking.could_fit(info, request)

    def stopping(self, task: ActiveTask) -> str | None:
        """Why a preempted task is not placed again yet (its old copy may still run)."""
        return self.preemption.stopping(task)

    def release_hold(self, task_id: str) -> None:
        """The task was placed: what it held is free for everyone."""
        for cluster in [c for c, h in self.reserved.items() if h.task_id == task_id]:
            del self.reserved[cluster]
        self.preemption.preempting.pop(task_id, None)

    async def preempt(self, cycle: Cycle) -> list[Command]:
        """For tasks that fit nowhere (in cycle order), evict victims in one cluster each.

        Victims go back to their queue (``Preempted`` event, a CancelTask with the grace
        period to their member); the preemptor holds the cluster and is placed only once the
        member's inventory shows the room free (its own confirmation that they are gone).
        Carried out by ``hub.queueing.eviction.Preemption``.
        """
        return await self.preemption.run(cycle)


class _Waiting:
    """"Is this task still waiting to be placed?" (Queued, not being re-queued, not parked),
    asked of the few tasks holding a cluster or a preemption, not built for every task."""

    def __init__(self, owner: Queueing) -> None:
        self.owner = owner

    def __contains__(self, task_id: object) -> bool:
        task = self.owner.tasks.active.get(task_id) if isinstance(task_id, str) else None
        return (task is not None and task.state == TaskState.QUEUED and not task.saving
                and not self.owner.parking.parked(task))
