"""ClusterReady filter: only Ready, uncordoned clusters the request does not exclude.

First in the default profile, so the expensive filters never look at a cluster that could
not take a placement anyway.
"""

from __future__ import annotations

from typing import ClassVar, Final

from fuyao.spec import ClusterState
from hub.fleet import ClusterInfo
from hub.placement.framework import (
    SUCCESS,
    Code,
    CycleState,
    Depends,
    Handle,
    PlacementRequest,
    Status,
)

NAME: Final = "ClusterReady"
REASON_NOT_READY: Final = "cluster not ready"
REASON_CORDONED: Final = "cluster cordoned"
REASON_EXCLUDED: Final = "cluster excluded"

_NOT_READY: Final = Status(Code.UNSCHEDULABLE, REASON_NOT_READY, NAME)
_CORDONED: Final = Status(Code.UNSCHEDULABLE, REASON_CORDONED, NAME)
_EXCLUDED: Final = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_EXCLUDED, NAME)
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict
# Enum members read per cluster, taken once: from compiled code ``ClusterState.READY`` is a
# lookup through the enum's metaclass (about 700 instructions), a module name is not.
_READY: Final = ClusterState.READY
_CORDONED_STATE: Final = ClusterState.CORDONED


class ClusterReady:
    """Rejects clusters that are not Ready, are cordoned, or are excluded by the request."""

    name: ClassVar[str] = NAME
    depends: ClassVar[Depends] = Depends.SETTINGS
    variant: ClassVar[None] = None   # reads neither priority nor failover

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """Excluded, then cordoned, then not Ready."""
        if req.exclude and cluster.name in req.exclude:
            return _EXCLUDED
        if cluster.cordoned or cluster.state == _CORDONED_STATE:
            return _CORDONED
        if cluster.state != _READY:
            return _NOT_READY
        return _SUCCESS
