"""One placement cycle's order: strict priority levels, weighted DRF, FIFO, bounded backfill.

``Queueing.begin`` (``hub.queueing.queueing``) builds a ``Cycle`` from the queued tasks; the
placement loop (``hub.loops``) iterates it and reports each decision back::

    for task in cycle:
        request = cycle.request(task)        # None: a quota holds it (see cycle.held)
        request, result = cycle.decide(task, request, partial(misses.schedule, scheduler))
        cycle.admit(task, result)            # per-model / per-cluster quotas, then reserve
        cycle.placed(task, result) | cycle.missed(task, request, result)

Order: queues of a higher priority level first (strict); inside a level, the queue with the
lowest weighted dominant share next (``share / weight``, updated after each placement, a
heap: O(log queues) per decision); inside a queue, task priority then age. A task no
cluster could take even empty is parked (left out of later cycles until the fleet's offer
changes: ``hub.queueing.parking``). Any other task that fits
nowhere at the head of its queue blocks the tasks behind it for ``hold_cycles`` cycles;
after that up to ``lookahead`` tasks behind it are tried each cycle (backfill) while it
holds a reservation on its nearest-fit cluster, so backfill never takes that room from it -
unless it could not fit that cluster even with nothing running there (then it holds none).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hub.activetask import ActiveTask
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.queueing.quota import QueueState, Usage, cluster_holds, demand, dominant_share, quota_hold

if TYPE_CHECKING:
    from hub.queueing.queueing import Queueing

Rank = tuple[int, int]   # (queue level, task priority): higher wins


@dataclass(frozen=True)
class Hold:
    """A cluster kept for one task: only it, and tasks of a higher rank, may use it."""

    task_id: str
    task_name: str
    rank: Rank
    kind: str          # "backfill" or "preemption"
    until: float       # monotonic time it lapses


@dataclass
class _Lane:
    """One queue's candidates this cycle."""

    state: QueueState
    tasks: list[ActiveTask]
    next: int = 0
    blocked: bool = False      # its head fits nowhere and still holds the queue
    head_tried: bool = False
    behind: int = 0            # tasks tried behind a blocked head (backfill lookahead)
    key: float = 0.0


@dataclass
class Cycle:
    """The candidates of one cycle in order, and what the cycle learnt about them."""

    owner: Queueing
    lanes: dict[str, _Lane]
    usage: Usage
    totals: Mapping[str, int]
    clusters: Sequence[str]
    held: list[tuple[ActiveTask, str]] = field(default_factory=list)
    misses: list[tuple[ActiveTask, PlacementRequest, PlacementResult]] = field(
        default_factory=list)
    admitted: set[str] = field(default_factory=set)
    holds: dict[str, str] = field(default_factory=dict)
    heads: dict[str, int] = field(default_factory=dict)   # missed heads -> cycles blocked
    quota_excluded: dict[str, str] = field(default_factory=dict)  # task -> cluster quotas

    def __post_init__(self) -> None:
        for lane in self.lanes.values():
            lane.key = self._share(lane.state)

    def _share(self, queue: QueueState) -> float:
        return dominant_share(self.usage.of(queue.name), self.totals) / queue.weight

    def __iter__(self) -> Iterator[ActiveTask]:
        levels = sorted({lane.state.priority for lane in self.lanes.values()}, reverse=True)
        for level in levels:
            heap = [(lane.key, name) for name, lane in self.lanes.items()
                    if lane.state.priority == level and lane.tasks]
            heapq.heapify(heap)
            while heap:
                _, name = heapq.heappop(heap)
                lane = self.lanes[name]
                task = self._take(lane)
                if task is None:
                    continue
                yield task
                if self._open(lane):
                    heapq.heappush(heap, (lane.key, name))

    def _take(self, lane: _Lane) -> ActiveTask | None:
        if not self._open(lane):
            return None
        task = lane.tasks[lane.next]
        lane.next += 1
        if lane.blocked:
            lane.behind += 1
        return task

    def _open(self, lane: _Lane) -> bool:
        if lane.next >= len(lane.tasks):
            return False
        if not lane.blocked:
            return True
        return lane.behind < self.owner.config.lookahead

    def rank(self, task: ActiveTask) -> Rank:
        """The task's (queue level, priority)."""
        lane = self.lanes.get(task.queue)
        return (lane.state.priority if lane else 0, task.priority)

    def request(self, task: ActiveTask) -> PlacementRequest | None:
        """The request to schedule (clusters over a per-cluster quota excluded); None when
        a quota holds the task (recorded in ``held``). Schedule it with ``decide``."""
        lane = self.lanes[task.queue]
        stopping = self.owner.stopping(task)
        if stopping is not None:     # its preempted copy may still run: never two at once
            self.holds[task.id] = stopping
            return None
        if not lane.state.limits and not lane.state.cluster_limits:
            return task.request()    # no quota to hold it or to exclude a cluster
        need = demand(task.request().requests)
        why = (quota_hold(lane.state, self.owner.states(), self.usage, need)
               if lane.state.limits else None)
        if why is None and lane.state.cluster_limits:
            over = cluster_holds(lane.state, self.usage, need, self.clusters)
            if over and len(over) == len(self.clusters):
                why = next(iter(over.values()))
            elif over:      # named if it then fits nowhere else
                self.quota_excluded[task.id] = "; ".join(over[c] for c in sorted(over))
            excluded = set(over)
        else:
            excluded = set()
        if why is not None:
            self._hold(task, why)
            return None
        base = task.request()
        if not excluded - base.exclude:
            return base
        return replace(base, exclude=base.exclude | frozenset(excluded))

    def decide(self, task: ActiveTask, request: PlacementRequest,
               schedule: Callable[[PlacementRequest], tuple[PlacementRequest, PlacementResult]],
               ) -> tuple[PlacementRequest, PlacementResult]:
        """Schedule ``request`` (``schedule`` answers the request it decided for and the
        result); if it chose a cluster kept for another task of a rank at least the task's,
        schedule again without the kept clusters. (Asked this way round, a decision pays
        for the holds only when it would take a held cluster.)"""
        request, result = schedule(request)
        if result.cluster is None or result.cluster not in self.owner.reserved:
            return request, result
        rank = self.rank(task)
        kept = frozenset(c for c, hold in self.owner.reserved.items()
                         if hold.task_id != task.id and rank <= hold.rank)
        if result.cluster not in kept:
            return request, result
        return schedule(replace(request, exclude=request.exclude | kept))

    def admit(self, task: ActiveTask, result: PlacementResult) -> bool:
        """After the fit chose a cluster and model: False (and held) if a per-model or
        per-cluster quota would be exceeded there."""
        lane = self.lanes[task.queue]
        if not lane.state.cluster_limits and not any(r.startswith("gpu.")
                                                     for r in lane.state.limits):
            return True     # nothing the chosen cluster or model could change
        need = demand(task.request().requests, result.model)
        why = quota_hold(lane.state, self.owner.states(), self.usage, need)
        if why is None and result.cluster is not None:
            why = cluster_holds(lane.state, self.usage, need, [result.cluster]).get(
                result.cluster)
        if why is None:
            return True
        self._hold(task, why)
        return False

    def _hold(self, task: ActiveTask, why: str) -> None:
        self.held.append((task, why))
        self.holds[task.id] = why

    def placed(self, task: ActiveTask, result: PlacementResult) -> None:
        """A task was placed: count its use, move its queue's share, end its hold."""
        lane = self.lanes[task.queue]
        self.admitted.add(task.id)
        self.owner.models[task.id] = result.model
        self.usage.charge(task.queue, result.cluster, demand(task.request().requests,
                                                            result.model))
        lane.key = self._share(lane.state)
        lane.head_tried = True
        self.owner.release_hold(task.id)

    def missed(self, task: ActiveTask, request: PlacementRequest,
               result: PlacementResult) -> None:
        """A task fit nowhere: parked if no cluster could take it even empty (then it holds
        nothing: ``hub.queueing.parking``); else at its queue's head it blocks the queue for
        a while, and preemption may make room for it."""
        if self.owner.parking.consider(task):
            return
        self.misses.append((task, request, result))
        if task.id in self.quota_excluded:
            self.holds[task.id] = self.quota_excluded[task.id]
        lane = self.lanes[task.queue]
        if lane.head_tried:
            return
        lane.head_tried = True
        blocked = self.owner.blocked.get(task.id, 0) + 1
        self.heads[task.id] = blocked
        config = self.owner.config
        if blocked <= config.hold_cycles:
            lane.next = len(lane.tasks)        # strict FIFO for now: nothing behind it
            return
        lane.blocked = True
        nearest = result.error.nearest_fit if result.error else None
        if nearest is not None and self.owner.could_ever_fit(nearest, request):
            self.owner.hold_cluster(nearest, task, self.rank(task), "backfill")
