"""TaintToleration filter and score: cluster taints against the task's tolerations.

A cluster tainted ``NoSchedule`` takes only tasks that tolerate the taint; the rejection
names the first taint not tolerated (unresolvable: waiting will not help). A
``PreferNoSchedule`` taint only lowers the score: 100 x the share of the cluster's
``PreferNoSchedule`` taints the task tolerates (100 with none). Both read only the request's
tolerations and the cluster's taints, so the scheduler caches them (tolerations are part of
the request's ``cluster_key``; a taint change moves the cluster's version).
"""

from __future__ import annotations

from typing import ClassVar, Final

from fuyao.taints import tolerated
from hub.fleet import ClusterInfo
from hub.placement.framework import (
    MAX_SCORE,
    SUCCESS,
    Code,
    CycleState,
    Depends,
    Handle,
    PlacementRequest,
    Status,
)

NAME: Final = "TaintToleration"
REASON_TAINT: Final = "cluster has a taint the task does not tolerate: {taint}"
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict


class TaintToleration:
    """Keeps tasks off clusters whose NoSchedule taints they do not tolerate."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.SETTINGS
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """``SUCCESS`` unless some NoSchedule taint is not tolerated."""
        for taint in cluster.taints:
            if taint.effect == "NoSchedule" and not tolerated(taint, req.tolerations):
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              REASON_TAINT.format(taint=taint), NAME)
        return _SUCCESS

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """100 x tolerated / all PreferNoSchedule taints (100 when there are none)."""
        soft = [t for t in cluster.taints if t.effect == "PreferNoSchedule"]
        if not soft:
            return MAX_SCORE
        return MAX_SCORE * sum(tolerated(t, req.tolerations) for t in soft) / len(soft)
