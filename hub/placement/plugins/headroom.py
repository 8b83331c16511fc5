"""Headroom filter and score: keep each cluster's failover reserve free.

An ordinary task fits a cluster only if, after it, every resource it uses stays within
``(1 - headroom) x allocatable``: cpu, memory and - for GPU tasks - the devices of the model
NodeFit chose, counted in milli-devices per model across the whole cluster. Failover
re-placements and tasks at or above the scheduler's ``headroom_priority`` may use the
reserve. The score is the fraction of the tightest of those resources left after placing
(0..100): the default profile uses it to prefer the emptier cluster.
"""

from __future__ import annotations

from typing import ClassVar, Final

from hub.fleet import ClusterInfo, Fit
from hub.placement.framework import (
    MAX_SCORE,
    MIN_SCORE,
    SUCCESS,
    Code,
    CycleState,
    Handle,
    PlacementRequest,
    Status,
)
from hub.placement.plugins.node_fit import fit_for

NAME: Final = "Headroom"
REASON_HEADROOM: Final = "below headroom reserve"

_BELOW: Final = Status(Code.UNSCHEDULABLE, REASON_HEADROOM, NAME)
_EPSILON: Final = 1e-9
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict


class Headroom:
    """Rejects ordinary tasks that would eat into the reserve; prefers roomier clusters."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle) -> None:
        self._threshold = handle.headroom_priority
        self._decision: CycleState | None = None
        self._rooms: dict[str, float] = {}   # room_after per cluster for ``_decision``
        self._needs: Needs = (0, 0, 0)       # its request's amounts
        self._exempt = False                 # may its request use the reserve?

    def variant(self, req: PlacementRequest) -> bool:
        """What the filter reads of priority and failover: may the task use the reserve?"""
        return req.failover or req.priority >= self._threshold

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """``SUCCESS`` for failover and high priority, else only if the reserve stays free."""
        if self._decision is not ctx:
            self._start(ctx, req)
        if self._exempt:
            return _SUCCESS
        left = self._room(ctx, req, cluster)
        return _SUCCESS if left >= cluster.headroom - _EPSILON else _BELOW

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """100 x the fraction of the tightest resource left after placing."""
        return max(MIN_SCORE, min(MAX_SCORE, MAX_SCORE * self._room(ctx, req, cluster)))

    def _room(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """``room_after``, once per cluster and decision (the score reuses the filter's)."""
        if self._decision is not ctx:
            self._start(ctx, req)
        left = self._rooms.get(cluster.name)
        if left is None:
            left = self._rooms[cluster.name] = _room_after(ctx, req, cluster, self._needs)
        return left

    def _start(self, ctx: CycleState, req: PlacementRequest) -> None:
        """A new decision (one request per ``CycleState``): what the filter and the score
        read of its request, read once - not per cluster judged (each is an attribute read
        of a Python object)."""
        self._decision, self._rooms, self._needs = ctx, {}, _needs(req)
        self._exempt = self.variant(req)


def room_after(ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
    """The smallest fraction left, over the resources the task uses, once it is placed."""
    return _room_after(ctx, req, cluster, _needs(req))


Needs = tuple[int, int, int]   # the whole task's CPU (milli), memory (MiB), GPU (milli)


def _needs(req: PlacementRequest) -> Needs:
    r = req.requests
    return r.cpu_milli * r.replicas, r.memory_mib * r.replicas, r.gpu_milli * r.replicas


def _room_after(ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo,
                needs: Needs) -> float:
    """``room_after`` with the request's amounts read once (``_needs``): each is an
    attribute read of a Python object, several a decision for every cluster judged."""
    cpu, memory, gpu = needs
    left = min(
        _fraction(cluster.cpu_total, cluster.cpu_used, cpu),
        _fraction(cluster.memory_total, cluster.memory_used, memory),
    )
    if gpu:
        found = fit_for(ctx, req, cluster)
        if isinstance(found, Fit) and found.model is not None:
            total, used = cluster.device_milli(found.model)
            left = min(left, _fraction(total, used, gpu))
    return left


def _fraction(total: int, used: int, need: int) -> float:
    if total <= 0:
        return 1.0 if need == 0 else -1.0
    return (total - used - need) / total
