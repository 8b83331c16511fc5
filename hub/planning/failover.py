"""N-1: if one cluster died now, could the others take everything it runs?

``n_minus_one`` answers it for every cluster with the hub's own scheduler on a copy of the
fleet view (``hub.planning.snapshot``). For a lost cluster X, its tasks (placed or running
there) are re-placed one by one in queue order (priority, then submission) as the hub's
failover would: ``failover=True`` - so, as DESIGN says, re-placements may use the other
clusters' headroom reserve - with X excluded, each reserved on the copy so the next sees
the room taken. What does not fit is listed with its demand (``short``: devices per model
it ran on, cores and GiB for CPU-only tasks). Then every reservation of the scenario is
released and the next cluster is judged on the same copy (by the same scheduler).

``headroom_needed`` for X is the fraction of the capacity its tasks could use on the other
open clusters (nodes their selector matches: devices of the model they ran on, cores for
CPU-only tasks) that they would take, the largest: a floor - packing on nodes may need more,
which the verdict (the scheduler's own answer) shows. ``headroom_recommended`` per cluster
C is the largest ``headroom_needed`` over the other clusters: kept free everywhere, it
covers the loss of any one. 1.0 means no headroom can: the others lack the model or size.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fuyao.capacity import ClusterLoss, NMinusOne
from hub.fleet import NO_MODEL, WHOLE, ClusterInfo, FleetView
from hub.placement import PlacementRequest, Profile, Scheduler
from hub.planning.snapshot import copy_fleet

RULE = ("each lost cluster's tasks are re-placed by the hub's scheduler as failovers "
        "(allowed into the other clusters' headroom reserve), in queue order")
_DIGITS = 3


@dataclass(frozen=True, slots=True)
class Running:
    """One task placed on or running in a cluster: what a failover would re-place."""

    request: PlacementRequest
    model: str          # the device model it runs on there (``none`` for CPU-only)
    order: tuple[int, int]   # (-priority, submission seq): queue order


def n_minus_one(
    fleet: FleetView, profile: Profile, running: Mapping[str, Sequence[Running]], *,
    headroom_priority: int = 1000, spend: bool = False,
) -> NMinusOne:
    """The N-1 verdict for every cluster of ``fleet`` (``running``: tasks per cluster);
    ``spend``: ``fleet`` is itself a planning copy nothing else reads, judged as it is (its
    capacity is as it was after, the order of its index's buckets may not be)."""
    copy = fleet if spend else copy_fleet(fleet)
    scheduler, room = Scheduler(copy, profile, headroom_priority=headroom_priority), Room()
    try:
        losses = {c.name: _lose(copy, scheduler, c.name,
                                sorted(running.get(c.name, ()), key=lambda r: r.order), room)
                  for c in copy.clusters()}
    finally:
        scheduler.forget()   # its tables hold the copy's clusters in a cycle
    names = list(losses)
    recommended = {
        name: round(max((losses[other].headroom_needed for other in names if other != name),
                        default=0.0), _DIGITS)
        for name in names
    }
    return NMinusOne(safe=all(loss.safe for loss in losses.values()), rule=RULE,
                     clusters=losses, headroom_recommended=recommended)


def _lose(
    copy: FleetView, scheduler: Scheduler, lost: str, tasks: Sequence[Running], room: Room,
) -> ClusterLoss:
    """Re-place ``lost``'s tasks on the others in ``copy``; undo the reservations after.
    One scheduler judges every lost cluster: its caches follow the copy's changes as the
    hub's scheduler follows the live view's (decisions as an uncached one's), so a lost
    cluster's first task re-judges only the clusters the last scenario touched."""
    moved: Counter[str] = Counter()
    unplaced: list[str] = []
    short: dict[str, float] = defaultdict(float)
    held: list[str] = []
    try:
        for task in tasks:
            req = replace(task.request, failover=True, exclude=frozenset({lost}),
                          task_id=f"n-1/{task.request.task_id}")
            result = scheduler.schedule(req)
            if result.cluster is not None and scheduler.reserve(req, result).ok:
                moved[result.cluster] += 1
                held.append(req.task_id)
                continue
            unplaced.append(task.request.name)
            for key, amount in _demand(task).items():
                short[key] += amount
    finally:
        for task_id in held:
            copy.release(task_id)
    others = [c for c in copy.clusters() if c.name != lost]
    return ClusterLoss(
        safe=not unplaced, tasks=len(tasks), moved=dict(sorted(moved.items())),
        unplaced=unplaced, short={k: round(v, _DIGITS) for k, v in sorted(short.items())},
        headroom_needed=round(_needed(tasks, others, room), _DIGITS),
    )


def _demand(task: Running) -> dict[str, float]:
    """What a task needs in total: devices of its model, or cores and GiB if CPU-only."""
    r = task.request.requests
    if r.gpu_milli:
        return {task.model: r.gpu_milli * r.replicas / WHOLE}
    return {"cpu": r.cpu_milli * r.replicas / 1000, "memory_gib": r.memory_mib * r.replicas / 1024}


def _needed(tasks: Sequence[Running], others: Sequence[ClusterInfo], room: Room) -> float:
    """The largest fraction of the capacity the tasks could use on the other (open)
    clusters that they would take: per selector and model (devices; cores for CPU-only)."""
    need: Counter[tuple[str, str]] = Counter()
    selectors: dict[str, PlacementRequest] = {}
    for task in tasks:
        r = task.request.requests
        key = task.request.selector_key
        selectors.setdefault(key, task.request)
        if r.gpu_milli and task.model != NO_MODEL:
            need[(key, task.model)] += r.gpu_milli * r.replicas
        else:
            need[(key, NO_MODEL)] += r.cpu_milli * r.replicas
    open_ = [c for c in others if c.schedulable]
    fractions = [0.0]
    for (key, model), amount in need.items():
        req = selectors[key]
        fractions.append(_share(amount, sum(room(c, req, model) for c in open_)))
    return max(fractions)


class Room:
    """``_usable`` per (cluster, selector, model), kept for one N-1 answer: it reads the
    nodes' allocatable cpu, device counts and labels, which no re-placement changes (every
    lost cluster's tasks would otherwise walk the other clusters' nodes again)."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known: dict[tuple[str, str, str], int] = {}

    def __call__(self, cluster: ClusterInfo, req: PlacementRequest, model: str) -> int:
        key = (cluster.name, req.selector_key, model)
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = _usable(cluster, req, model)
        return found


def _usable(cluster: ClusterInfo, req: PlacementRequest, model: str) -> int:
    """Milli-devices of ``model`` (cpu millicores for ``none``) on the cluster's nodes that
    ``req``'s selector matches."""
    found = cluster.matching(req.selector, req.selector_key)
    total = 0
    for group in found.groups:
        for node in group.nodes.values():
            if found.per_node and not req.selector.matches(node.labels):
                continue
            if model == NO_MODEL:
                total += node.alloc.cpu_milli
            else:
                total += node.model_devices.get(model, 0) * WHOLE
    return total


def _share(need: int, total: int) -> float:
    """``need`` as a fraction of ``total``; 1.0 when no headroom could cover it."""
    if need <= 0:
        return 0.0
    return min(1.0, need / total) if total > 0 else 1.0
