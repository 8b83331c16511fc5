"""NodeFit filter: some node - or set of nodes, one per replica - of the cluster really fits.

A node fits one replica when its labels match the selector, it is schedulable, and after
the hub's reservations it still has the cpu, memory, a pod slot and the devices: whole
cards (free share 1000) of one model with at least the requested device memory, or one
device with enough free share. All replicas of a task go to devices of one model, on one
or more nodes of this cluster. The search (``hub.fleet.find_fit``) walks the cluster's
index, not its nodes; ``fit_for`` keeps its answer in the ``CycleState`` so Headroom, the
scheduler and the reserve step reuse it.
"""

from __future__ import annotations

from typing import ClassVar, Final

from fuyao.quantity import format_cpu, format_mib
from fuyao.spec import TaskRequests
from hub.fleet import WHOLE, ClusterInfo, Fit, Miss, MissKind, find_fit
from hub.placement.framework import (
    SUCCESS,
    Code,
    CycleState,
    Depends,
    Handle,
    PlacementRequest,
    Status,
)
from hub.placement.plugins.task_selector import REASON_NO_MATCH

NAME: Final = "NodeFit"
REASON_NO_NODES: Final = "no schedulable node"
REASON_NO_FIT: Final = "no node with {what}"
REASON_GANG: Final = "only {placed} of {replicas} replicas fit on nodes with {what}"
# REASON_NO_MATCH (from TaskSelector) when no node's labels match the selector.

_NO_NODES: Final = Status(Code.UNSCHEDULABLE, REASON_NO_NODES, NAME)
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict
# read per miss: enum members through a name (see ``hub.placement.scheduler``)
_MISS_NO_NODES: Final = MissKind.NO_NODES
_MISS_NO_MATCH: Final = MissKind.NO_MATCH
_MISS_GANG: Final = MissKind.GANG
_MISS_CPU: Final = MissKind.CPU
_MISS_MEMORY: Final = MissKind.MEMORY
_MISS_PODS: Final = MissKind.PODS


class NodeFit:
    """Rejects clusters where no node (set) has room for every replica."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.FIT
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """``SUCCESS`` with the fit recorded in ``ctx.fits``, or what no node had."""
        found = fit_for(ctx, req, cluster)
        if isinstance(found, Fit):
            return _SUCCESS
        kind = found.kind
        if kind is _MISS_NO_NODES:
            return _NO_NODES
        if kind is _MISS_NO_MATCH:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                          REASON_NO_MATCH.format(selector=req.selector_key), NAME)
        return Status(Code.UNSCHEDULABLE, miss_reason(found, req), NAME)


def fit_for(ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Fit | Miss:
    """The fit search's answer for this cluster, computed once per decision."""
    fits, name = ctx.fits, cluster.name
    found = fits.get(name)
    if found is None:
        found = fits[name] = find_fit(cluster, req.selector, req.selector_key, req.requests,
                                      ctx.least_overqualified)
    return found


def miss_reason(miss: Miss, req: PlacementRequest) -> str:
    """``no node with <selector> and <what was needed, up to what was missing>``."""
    r = req.requests
    needs = [req.selector_key] if req.selector_key else []
    if r.gpu_milli:
        needs.append(describe_devices(r))
    if miss.kind is _MISS_GANG:
        if not r.gpu_milli:
            needs.append(f"{format_cpu(r.cpu_milli)} free CPU")
            needs.append(f"{format_mib(r.memory_mib)} free memory")
        return REASON_GANG.format(placed=miss.placed, replicas=r.replicas,
                                  what=" and ".join(needs))
    if miss.kind >= _MISS_CPU:
        needs.append(f"{format_cpu(r.cpu_milli)} free CPU")
    if miss.kind >= _MISS_MEMORY:
        needs.append(f"{format_mib(r.memory_mib)} free memory")
    if miss.kind >= _MISS_PODS:
        needs.append("a free pod slot")
    return REASON_NO_FIT.format(what=" and ".join(needs))


def describe_devices(r: TaskRequests) -> str:
    """``4 free GPUs``, ``1 free GPU of >=80Gi``, ``500m free on one GPU``."""
    memory = f" of >={format_mib(r.gpu_memory_mib)}" if r.gpu_memory_mib else ""
    if r.gpu_milli < WHOLE:
        return f"{r.gpu_milli}m free on one GPU{memory}"
    cards = r.gpu_milli // WHOLE
    return f"{cards} free GPU{'s' if cards > 1 else ''}{memory}"
