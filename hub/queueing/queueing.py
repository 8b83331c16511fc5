"""``Queueing``: the hub's queueing layer, between the REST API and placement.

The hub (``hub.core``) builds one and the placement loop (``hub.loops``) asks it, every
cycle, for the order to try queued tasks in (``begin`` -> ``hub.queueing.cycle.Cycle``),
then lets it ``finish`` the cycle and ``preempt`` for tasks that fit nowhere. Everything it
needs per decision is in memory: queue settings (``QueueBook``), each queue's use (summed
once per cycle from the active tasks: O(active tasks) per cycle, O(log queues) per
decision), cluster holds for backfill and preemption. The REST router (``hub.api.queues``)
calls ``create``/``update``/``delete``/``view``/``views``; the hub's task views call
``hold_for``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from fuyao.errors import InvalidInput
from fuyao.queues import QueueSpec, QueueUpdate, QueueView, format_resource
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, Command
from hub.fleet import FleetView
from hub.placement.profile import Profile
from hub.queueing.book import QueueBook
from hub.queueing.cycle import Cycle, Hold, Rank, _Lane
from hub.queueing.preempt import Planner
from hub.queueing.quota import (
    QueueState,
    Usage,
    Vector,
    borrowing,
    demand,
    dominant_share,
    quota_hold,
)
from hub.store import QueueRecord
from hub.taskbook import TaskBook

log = logging.getLogger(__name__)
ADMITTED = (TaskState.PLACED, TaskState.RUNNING)
STOP_MARGIN_SECONDS = 2.0   # after a victim's grace period, before it may be placed again


@dataclass(frozen=True)
class QueueingConfig:
    """Backfill and preemption knobs (hub config key ``queueing``)."""

    hold_cycles: int = 2            # a blocked queue head holds its queue this many cycles
    lookahead: int = 100            # then this many tasks behind it are tried per cycle
    reservation_seconds: float = 600.0   # a cluster held for a blocked head or preemptor
    preemption: bool = True
    grace_seconds: int = 30         # sent to the member with each eviction
    preemptions_per_cycle: int = 2  # tasks that may plan a preemption per cycle

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> QueueingConfig:
        """From the hub config's ``queueing`` mapping; InvalidInput names a bad key."""
        if not raw:
            return cls()
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise InvalidInput(f"queueing: unknown key {unknown[0]!r}; known: {sorted(known)}")
        out = cls(**raw)
        if out.hold_cycles < 0 or out.lookahead < 0 or out.grace_seconds < 0 \
                or out.preemptions_per_cycle < 0 or out.reservation_seconds <= 0:
            raise InvalidInput("queueing: values must not be negative")
        return out


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
        self.positions: dict[str, int] = {}
        self.holds: dict[str, str] = {}
        self.preempting: dict[str, tuple[str, tuple[str, ...]]] = {}  # preemptor -> plan
        self.evicted: dict[str, tuple[str, str, float]] = {}  # victim -> by, cluster, until
        self.usage = Usage()
        self._demands: dict[str, Vector] = {}
        self.planner = Planner(fleet, profile, headroom_priority, self.models)

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
        return [self._view(rec, usage) for _, rec in sorted(self.book.records.items())]

    def view(self, name: str) -> QueueView:
        """One queue: settings, use against quota, dominant and fair share now."""
        return self._view(self.book.get(name), self._usage())

    def _view(self, rec: QueueRecord, usage: Usage) -> QueueView:
        state = self.book.states[rec.name]
        counts = {"queued": 0, "admitted": 0}
        active_queues: set[str] = set()
        for task in self.tasks.active.values():
            active_queues.add(task.queue)
            if task.queue == rec.name:
                counts["admitted" if task.state in ADMITTED else "queued"] += 1
        level = [q for q in self.states() if q.priority == state.priority
                 and (q.name in active_queues or q.name == rec.name)]
        fair = state.weight / sum(q.weight for q in level)
        used = usage.of(rec.name)
        return QueueView(
            name=rec.name, priority=rec.priority, weight=rec.weight, quotas=rec.quotas,
            cluster_quotas=rec.cluster_quotas, borrow=rec.borrow,
            usage={r: format_resource(r, v) for r, v in sorted(used.items()) if v},
            cluster_usage={c: {r: format_resource(r, v) for r, v in sorted(vec.items()) if v}
                           for (q, c), vec in sorted(usage.by_cluster.items())
                           if q == rec.name and any(vec.values())},
            dominant_share=round(dominant_share(used, self.totals()), 4),
            fair_share=round(fair, 4), created_at=rec.created_at, updated_at=rec.updated_at,
            **counts,
        )

    # -- a placement cycle --------------------------------------------------------------------

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
        usage = Usage()
        demands: dict[str, Vector] = {}
        for task in self.tasks.active.values():
            if task.state not in ADMITTED or task.cluster is None:
                continue    # (a divided task: its parts are charged)
            need = self._demands.get(task.id)
            if need is None:
                need = demand(task.spec.requests(), self._model(task))
            demands[task.id] = need
            usage.charge(task.queue, task.cluster, need)
        self._demands = demands
        return usage

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

    def begin(self, queued: Sequence[ActiveTask]) -> Cycle:
        """This cycle's order over ``queued`` (already sorted by priority, then age)."""
        now = time.monotonic()
        waiting = {t.id for t in queued}
        for cluster, hold in list(self.reserved.items()):
            if hold.until < now or hold.task_id not in waiting:
                del self.reserved[cluster]
        for task_id in [p for p in self.preempting if p not in waiting]:
            del self.preempting[task_id]
        for task_id in [v for v in self.evicted if v not in waiting]:
            del self.evicted[task_id]
        active = set(self.tasks.active)
        for task_id in [t for t in self.models if t not in active]:
            del self.models[task_id]
        lanes: dict[str, _Lane] = {}
        for task in queued:
            lane = lanes.get(task.queue)
            if lane is None:
                state = self.book.states.get(task.queue) or QueueState(task.queue)
                lane = lanes[task.queue] = _Lane(state, [])
            lane.tasks.append(task)
        self.usage = self._usage()
        return Cycle(self, lanes, self.usage, self.totals(),
                     [c.name for c in self.fleet.ordered])

    def finish(self, cycle: Cycle) -> None:
        """Keep what the cycle learnt: positions, quota holds, blocked heads."""
        self.positions = cycle.waiting_positions()
        self.holds, self.blocked = cycle.holds, cycle.heads

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

    def stopping(self, task: ActiveTask) -> str | None:
        """Why a preempted task is not placed again yet: its old copy has its grace period
        (plus a margin) to stop, and a task never runs twice at once. None once it may."""
        held = self.evicted.get(task.id)
        if held is None:
            return None
        by, cluster, until = held
        left = until - time.monotonic()
        if left <= 0:
            del self.evicted[task.id]
            return None
        return f"preempted by {by}: waits up to {left:.0f}s for its copy on {cluster} to stop"

    def release_hold(self, task_id: str) -> None:
        """The task was placed: what it held is free for everyone."""
        for cluster in [c for c, h in self.reserved.items() if h.task_id == task_id]:
            del self.reserved[cluster]
        self.preempting.pop(task_id, None)

    # -- preemption ---------------------------------------------------------------------------

    async def preempt(self, cycle: Cycle) -> list[Command]:
        """For tasks that fit nowhere (in cycle order), evict victims in one cluster each.

        Victims go back to their queue (``Preempted`` event, a CancelTask with the grace
        period to their member); the preemptor holds the cluster and is placed only once the
        member's inventory shows the room free (its own confirmation that they are gone).
        """
        if not self.config.preemption:
            return []
        commands: list[Command] = []
        planned = 0
        for task, request, result in cycle.misses:
            if planned >= self.config.preemptions_per_cycle:
                break
            if task.id in self.preempting or task.state != TaskState.QUEUED \
                    or result.cluster is not None:
                continue
            candidates = self._candidates(task, cycle)
            if not candidates:
                continue
            rank = cycle.rank(task)
            kept = frozenset(c for c, hold in self.reserved.items()
                             if hold.task_id != task.id and rank <= hold.rank)
            if kept - request.exclude:    # never make room on a cluster kept for another
                request = replace(request, exclude=request.exclude | kept)
            keep = [t for t in self.tasks.active.values() if t.state == TaskState.PLACED]
            plan = self.planner.plan(request, candidates, cycle.rank, keep)
            if plan is None:
                continue
            planned += 1
            commands += await self._evict(task, plan.cluster, plan.victims, cycle)
        return commands

    def _candidates(self, task: ActiveTask, cycle: Cycle) -> dict[str, list[ActiveTask]]:
        """Evictable tasks by cluster: lower rank, or (no higher rank and) borrowing while
        the preemptor's queue is within its own quota."""
        rank = cycle.rank(task)
        state = self.book.states.get(task.queue) or QueueState(task.queue)
        need = demand(task.spec.requests())
        own_quota = QueueState(state.name, state.priority, state.weight, state.limits)
        reclaim = bool(state.limits) and quota_hold(own_quota, [], self.usage, need) is None
        lenders = {q.name: borrowing(q, self.usage) for q in self.states()}
        out: dict[str, list[ActiveTask]] = {}
        for victim in self.tasks.active.values():
            if victim.state not in ADMITTED or victim.cluster is None \
                    or not victim.spec.preemptible or victim.id == task.id:
                continue
            victim_rank = cycle.rank(victim)
            over = lenders.get(victim.queue, set()) & set(self._demands.get(victim.id, {}))
            if victim_rank < rank or (reclaim and over and victim.queue != task.queue
                                      and victim_rank <= rank):
                out.setdefault(victim.cluster, []).append(victim)
        return out

    async def _evict(self, task: ActiveTask, cluster: str, victims: Sequence[ActiveTask],
                     cycle: Cycle) -> list[Command]:
        commands: list[Command] = []
        evicted: list[str] = []
        for victim in victims:
            reason = (f"Preempted by {task.name} (queue {task.queue}, priority "
                      f"{task.priority}) on {cluster}")
            try:
                commands += await self.tasks.requeue(victim, reason, failover=False,
                                                     kind="Preempted",
                                                     grace=self.config.grace_seconds)
            except Exception:
                log.exception("could not preempt %s for %s", victim.name, task.name)
                continue
            evicted.append(victim.name)
            self.evicted[victim.id] = (task.name, cluster, time.monotonic()
                                       + self.config.grace_seconds + STOP_MARGIN_SECONDS)
            self.usage.charge(victim.queue, cluster, self._demands.pop(victim.id, {}), -1)
            await self.tasks.writer.call(
                self.tasks.writer.store.audit, "system", "task.preempt", victim.name,
                f"ok, preempted by {task.name} on {cluster}")
        if evicted:
            self.hold_cluster(cluster, task, cycle.rank(task), "preemption")
            self.preempting[task.id] = (cluster, tuple(evicted))
            log.info("task %s preempts %s on %s", task.name, ", ".join(evicted), cluster)
        return commands

    # -- what holds a task ---------------------------------------------------------------------

    def _positions_now(self) -> dict[str, int]:
        """Each queued task's place in its queue now (the cycle's order inside a queue)."""
        out: dict[str, int] = {}
        seen: Counter[str] = Counter()
        for task in self.tasks.queued():
            seen[task.queue] += 1
            out[task.id] = seen[task.queue]
        return out

    def hold_for(self, task: ActiveTask) -> dict[str, Any] | None:
        """The queue and quota state of a queued task (``task explain``, ``task describe``).

        ``{"queue", "position", "held_by", "usage", "quotas", "reserved_cluster",
        "preempting"}``: ``position`` 1 is next in its queue; ``held_by`` the quota that
        holds it (e.g. ``queue team-a: gpu A100 quota 16, in use 16``) or None;
        ``reserved_cluster`` a cluster kept for it (backfill or preemption); ``preempting``
        the victims it is waiting for. None when the task is not Queued.
        """
        if task.state != TaskState.QUEUED:
            return None
        rec = self.book.records.get(task.queue)
        used = self.usage.of(task.queue)
        plan = self.preempting.get(task.id)
        if task.id not in self.positions:      # submitted since the last cycle
            self.positions = self._positions_now()
        return {
            "queue": task.queue,
            "position": self.positions.get(task.id),
            "held_by": self.holds.get(task.id),
            "quotas": dict(rec.quotas) if rec else {},
            "borrow": dict(rec.borrow) if rec else {},
            "usage": {r: format_resource(r, v) for r, v in sorted(used.items()) if v},
            "reserved_cluster": next((c for c, h in self.reserved.items()
                                      if h.task_id == task.id), None),
            "preempting": list(plan[1]) if plan else [],
        }
