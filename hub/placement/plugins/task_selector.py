"""TaskSelector filter: some node of the cluster carries labels the task's selector matches.

Answers from the cluster's label groups (one selector evaluation per distinct label set,
cached), so it costs a dictionary lookup per cluster. Capacity is NodeFit's question.
"""

from __future__ import annotations

from typing import ClassVar

from hub.fleet import ClusterInfo
from hub.placement.framework import SUCCESS, Code, CycleState, Handle, PlacementRequest, Status

NAME = "TaskSelector"
REASON_NO_NODES = "cluster has no nodes"
REASON_NO_MATCH = "no node matches {selector}"

_NO_NODES = Status(Code.UNSCHEDULABLE, REASON_NO_NODES, NAME)


class TaskSelector:
    """Rejects clusters where no node's labels match the selector."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """No nodes at all, or none whose labels match."""
        if cluster.node_count == 0:
            return _NO_NODES
        key = req.selector_key
        if not key or cluster.has_match(req.selector, key):
            return SUCCESS
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_NO_MATCH.format(selector=key), NAME,
        )
