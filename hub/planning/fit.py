"""``capacity fit``: how many more tasks of one shape fit right now, per cluster and in total.

``count_fit`` copies the fleet view (``hub.planning.snapshot``; not when handed a copy to
spend, as ``Planner`` does) and packs the shape one task
at a time through the hub's own scheduler and profile: each decision filters, scores and
selects as a real placement would (per node, per device, headroom reserve counted), then
reserves on the copy so the next one sees the capacity gone. It stops when no cluster
takes one more, or at the request's limit. ``limited_by`` carries, per cluster, the reason
the scheduler gave for refusing the next one.

Queue quota: a ``QuotaProbe`` (the queueing layer's hook) says how many more tasks of the
shape a queue's quota still admits; ``None`` means no quota applies. The hub passes one once
queues carry quotas; until then the count is bounded by capacity alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from fuyao.capacity import FitAnswer
from fuyao.selector import parse_selector
from fuyao.spec import TaskSpec
from hub.fleet import FleetView
from hub.placement import PlacementRequest, Profile, Scheduler
from hub.planning.snapshot import copy_fleet

QuotaProbe = Callable[[str, TaskSpec], int | None]
"""(queue, task spec) -> how many more such tasks the queue's quota admits, None: no quota."""

LIMIT: Final = "limit"
QUOTA: Final = "quota"


def count_fit(
    fleet: FleetView, profile: Profile, spec: TaskSpec, *, limit: int,
    headroom_priority: int = 1000, quota: QuotaProbe | None = None, spend: bool = False,
) -> FitAnswer:
    """Pack ``spec`` into a copy of ``fleet`` until nothing more fits (or ``limit``);
    ``spend``: ``fleet`` is itself a planning copy nothing else reads, packed as it is."""
    allowed = quota(spec.queue, spec) if quota is not None else None
    stop = limit if allowed is None else min(limit, allowed)
    copy = fleet if spend else copy_fleet(fleet)
    scheduler = Scheduler(copy, profile, headroom_priority=headroom_priority)
    counts = {c.name: 0 for c in copy.clusters()}
    try:
        return _pack(scheduler, spec, counts, stop, limit, allowed)
    finally:
        scheduler.forget()   # its tables hold the copy's clusters in a cycle


def _pack(scheduler: Scheduler, spec: TaskSpec, counts: dict[str, int], stop: int, limit: int,
          allowed: int | None) -> FitAnswer:
    """Place ``spec`` one task at a time until nothing fits or ``stop``; the answer."""
    selector = parse_selector(spec.effective_selector())
    requests = spec.requests()
    limited: dict[str, str] = {}
    placed = 0
    while placed < stop:
        req = PlacementRequest(task_id=f"capacity-fit-{placed}", name="capacity-fit",
                               requests=requests, selector=selector, priority=spec.priority)
        result = scheduler.schedule(req)
        if result.cluster is None or not scheduler.reserve(req, result).ok:
            limited = {name: status.reason for name, status in sorted(result.statuses.items())
                       if not status.ok}
            break
        counts[result.cluster] += 1
        placed += 1
    else:
        if allowed is not None and allowed <= limit:
            limited[QUOTA] = f"queue {spec.queue} quota admits {allowed} more"
        else:
            limited[LIMIT] = f"stopped counting at {limit}"
    return FitAnswer(total=placed, clusters=counts, limited_by=limited,
                     capped=LIMIT in limited)
