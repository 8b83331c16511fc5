"""GPU memory sharing: a task that asks for an amount of one device's memory (``gpu_mem``).

Devices are shared in proportion: a device of ``M`` MiB gives ``m`` MiB as the share
``ceil(1000 x m / M)`` of its compute (or the task's own compute share, if larger) - the
rule the simulated member already reports (``free_memory_mib = memory x free share``) and
binds by (``fuyao.nodescheduler``). So two 8 GiB tasks fit on one 24 GiB card (334 + 334
milli), a 16 GiB task does not fit on a card with 12 GiB left (667 > 500), and a card shared
by memory is never handed out whole (its free share is below 1000) - with the fit search,
headroom rule, reservations and capacity of ``hub.fleet`` unchanged.

``schedule`` is what the placement loop, ``task explain`` and ``--dry-run`` call for every
request: a plain request goes straight to ``Scheduler.schedule``; a memory request is tried
as one share request per device memory size its selector matches in the fleet, the
smallest card first (least memory wasted), and the first that places wins - that request is
the one reserved. Cost: one decision per distinct size (a handful), only for such tasks.

``held_requests`` rebuilds that share request for a task placed before a hub restart
(``TaskBook`` holds its nodes again): the smallest card of its nodes big enough for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fuyao.nodescheduler import memory_share
from fuyao.spec import TaskRequests
from hub.fleet import WHOLE, FleetView
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler


def variants(scheduler: Scheduler, req: PlacementRequest) -> list[PlacementRequest]:
    """One share request per device memory size (>= the ask) the selector matches, ascending;
    a whole-card request with that memory floor when no card anywhere is big enough (so the
    fit error says so)."""
    r = req.requests
    want = r.gpu_mem_mib
    sizes = sorted({memory for cluster in scheduler.fleet.ordered
                    for _, memory, _ in cluster.matching(req.selector, req.selector_key).classes
                    if memory >= max(want, r.gpu_memory_mib)})
    if not sizes:
        return [replace(req, requests=replace(r, gpu_milli=WHOLE,
                                              gpu_memory_mib=max(want, r.gpu_memory_mib)))]
    return [replace(req, requests=replace(r, gpu_milli=memory_share(want, size, r.gpu_milli),
                                          gpu_memory_mib=size)) for size in sizes]


def schedule(scheduler: Scheduler,
             req: PlacementRequest) -> tuple[PlacementRequest, PlacementResult]:
    """The decision for ``req`` and the request it was made for (a share request for a
    memory task: reserve that one)."""
    if not req.requests.gpu_mem_mib:
        return req, scheduler.schedule(req)
    tried = variants(scheduler, req)
    first: tuple[PlacementRequest, PlacementResult] | None = None
    for variant in tried:
        result = scheduler.schedule(variant)
        if result.cluster is not None:
            return variant, result
        first = first or (variant, result)
    assert first is not None
    return first


def held_requests(fleet: FleetView, cluster: str, requests: TaskRequests,
                  nodes: Sequence[str]) -> TaskRequests:
    """What a placed task holds on ``nodes``: its own requests, or for a memory-sharing task
    the share of the smallest card on those nodes that has its memory (as ``schedule``
    chose it: smallest card first)."""
    want = max(requests.gpu_mem_mib, requests.gpu_memory_mib)
    info = fleet.cluster(cluster)
    if not requests.gpu_mem_mib or info is None:
        return requests
    sizes = sorted({d.memory_mib for name in set(nodes) if (node := info.node(name)) is not None
                    for d in node.info.devices if d.memory_mib >= want})
    if not sizes:
        return requests
    return replace(requests, gpu_milli=memory_share(requests.gpu_mem_mib, sizes[0],
                                                    requests.gpu_milli),
                   gpu_memory_mib=sizes[0])
