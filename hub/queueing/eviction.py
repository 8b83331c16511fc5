"""Preemption, carried out: which running tasks a waiting task may evict, evicting them, and
keeping their stopped copies from running twice.

``Queueing`` (``hub.queueing.queueing``) owns one ``Preemption``; the placement loop reaches
it through ``Queueing.preempt`` after each cycle, and ``hub.queueing.cycle`` asks
``stopping`` before it hands a preempted task to placement again. The victims themselves are
chosen by ``hub.queueing.preempt.Planner`` (the real fit code on a scratch copy of one
cluster); this module picks the candidates it may choose from (lower rank, or borrowing
beyond their queue's quota while the preemptor's queue is within its own; never
``preemptible: false``), re-queues the chosen ones through ``TaskBook.requeue`` (event
``Preempted``, a CancelTask with the grace period to their member) and holds the cluster for
the preemptor until the member's inventory shows the room free.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Container, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from fuyao.spec import TaskState
from hub.activetask import ActiveTask, Command
from hub.queueing.cycle import Cycle, Rank
from hub.queueing.quota import QueueState, borrowing, demand, quota_hold

if TYPE_CHECKING:
    from hub.queueing.queueing import Queueing

log = logging.getLogger(__name__)
ADMITTED = (TaskState.PLACED, TaskState.RUNNING)
STOP_MARGIN_SECONDS = 2.0   # after a victim's grace period, before it may be placed again


class Preemption:
    """Evictions in flight: preemptors waiting for room, victims waiting to stop."""

    def __init__(self, owner: Queueing) -> None:
        self.owner = owner
        self.preempting: dict[str, tuple[str, tuple[str, ...]]] = {}  # preemptor -> plan
        self.evicted: dict[str, tuple[str, str, float]] = {}  # victim -> by, cluster, until

    @property
    def tracking(self) -> bool:
        """True while some preemptor or victim is remembered (``prune`` has work)."""
        return bool(self.preempting or self.evicted)

    def prune(self, waiting: Container[str]) -> None:
        """Forget preemptors and victims no longer queued (placed, ended or cancelled)."""
        for task_id in [p for p in self.preempting if p not in waiting]:
            del self.preempting[task_id]
        for task_id in [v for v in self.evicted if v not in waiting]:
            del self.evicted[task_id]

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

    async def run(self, cycle: Cycle) -> list[Command]:
        """For tasks that fit nowhere (in cycle order), evict victims in one cluster each."""
        owner = self.owner
        if not owner.config.preemption:
            return []
        commands: list[Command] = []
        planned = 0
        floor: tuple[Rank | None] | None = None   # (lowest evictable rank,), once looked up
        for task, request, result in cycle.misses:
            if planned >= owner.config.preemptions_per_cycle:
                break
            if task.id in self.preempting or task.state != TaskState.QUEUED \
                    or result.cluster is not None:
                continue
            if floor is None:
                floor = (self.lowest_rank(cycle),)
            candidates = {} if floor[0] is None else self.candidates(task, cycle, floor[0])
            if not candidates:
                continue
            rank = cycle.rank(task)
            kept = frozenset(c for c, hold in owner.reserved.items()
                             if hold.task_id != task.id and rank <= hold.rank)
            if kept - request.exclude:    # never make room on a cluster kept for another
                request = replace(request, exclude=request.exclude | kept)
            keep = [t for t in owner.tasks.active.values() if t.state == TaskState.PLACED]
            plan = owner.planner.plan(request, candidates, cycle.rank, keep)
            if plan is None:
                continue
            planned += 1
            commands += await self._evict(task, plan.cluster, plan.victims, cycle)
            floor = None    # the evictions (and whatever ran while they awaited) moved it
        return commands

    def lowest_rank(self, cycle: Cycle) -> Rank | None:
        """The lowest rank of a task that may be evicted now (admitted, on a cluster,
        preemptible), None if there is none: ``candidates`` finds none below it."""
        ranks = [cycle.rank(t) for t in self.owner.tasks.active.on_clusters()
                 if t.state in ADMITTED and t.spec.preemptible]
        return min(ranks) if ranks else None

    def candidates(self, task: ActiveTask, cycle: Cycle,
                   lowest: Rank | None = None) -> dict[str, list[ActiveTask]]:
        """Evictable tasks by cluster: lower rank, or (no higher rank and) borrowing while
        the preemptor's queue is within its own quota.

        ``lowest``: ``lowest_rank`` now, if known. A preemptor below it, or at it and not
        reclaiming its quota, has none, found without a pass over every active task: when
        a burst outgrows the fleet every queued task misses, and a pass each took 74% of
        the hub's CPU (10 members, 6,000 tasks for 3,600 GPUs)."""
        owner = self.owner
        rank = cycle.rank(task)
        state = owner.book.states.get(task.queue) or QueueState(task.queue)
        if lowest is not None and (rank < lowest or (rank == lowest and not state.limits)):
            return {}     # below every victim, or level with them and no quota to reclaim
        need = demand(task.requests())
        own_quota = QueueState(state.name, state.priority, state.weight, state.limits)
        reclaim = bool(state.limits) and quota_hold(own_quota, [], owner.usage, need) is None
        if lowest is not None and rank == lowest and not reclaim:
            return {}
        lenders = {q.name: borrowing(q, owner.usage) for q in owner.states()}
        out: dict[str, list[ActiveTask]] = {}
        for victim in owner.tasks.active.values():
            if victim.state not in ADMITTED or victim.cluster is None \
                    or not victim.spec.preemptible or victim.id == task.id:
                continue
            victim_rank = cycle.rank(victim)
            over = lenders.get(victim.queue, set()) & set(owner.demand_of(victim.id))
            if victim_rank < rank or (reclaim and over and victim.queue != task.queue
                                      and victim_rank <= rank):
                out.setdefault(victim.cluster, []).append(victim)
        return out

    async def _evict(self, task: ActiveTask, cluster: str, victims: Sequence[ActiveTask],
                     cycle: Cycle) -> list[Command]:
        owner = self.owner
        writer = owner.tasks.writer
        grace = owner.config.grace_seconds
        commands: list[Command] = []
        evicted: list[str] = []
        for victim in victims:
            reason = (f"Preempted by {task.name} (queue {task.queue}, priority "
                      f"{task.priority}) on {cluster}")
            try:
                commands += await owner.tasks.requeue(victim, reason, failover=False,
                                                      kind="Preempted", grace=grace)
            except Exception:
                log.exception("could not preempt %s for %s", victim.name, task.name)
                continue
            evicted.append(victim.name)
            self.evicted[victim.id] = (task.name, cluster,
                                       time.monotonic() + grace + STOP_MARGIN_SECONDS)
            owner.uncharge(victim, cluster)
            await writer.call(writer.store.audit, "system", "task.preempt", victim.name,
                              f"ok, preempted by {task.name} on {cluster}")
        if evicted:
            owner.hold_cluster(cluster, task, cycle.rank(task), "preemption")
            self.preempting[task.id] = (cluster, tuple(evicted))
            log.info("task %s preempts %s on %s", task.name, ", ".join(evicted), cluster)
        return commands
