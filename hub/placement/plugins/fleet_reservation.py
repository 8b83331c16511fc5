"""FleetReservation reserve plugin: holds the chosen nodes' resources in the fleet view.

Run by ``Scheduler.reserve`` after a decision (the default profile's only reserve step);
equivalent to ``FleetView.reserve(cluster, task_id, requests, nodes, model=...)``. Both
calls are idempotent per task id.
"""

from __future__ import annotations

from typing import ClassVar, Final

from fuyao.errors import Conflict
from hub.fleet import Fit, FleetView
from hub.placement.framework import SUCCESS, Code, CycleState, Handle, PlacementRequest, Status

NAME: Final = "FleetReservation"


class FleetReservation:
    """Reserves a placement's nodes and devices in the hub's fleet view."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle) -> None:
        self._fleet: FleetView = handle.fleet

    def reserve(self, ctx: CycleState, req: PlacementRequest, cluster: str, fit: Fit) -> Status:
        """Hold the resources; a clash (nodes taken meanwhile) is an ``UNSCHEDULABLE`` status."""
        try:
            self._fleet.reserve(cluster, req.task_id, req.requests, fit.nodes, model=fit.model)
        except Conflict as exc:
            return Status(Code.UNSCHEDULABLE, exc.message, NAME)
        return SUCCESS

    def unreserve(self, ctx: CycleState, req: PlacementRequest, cluster: str) -> None:
        """Release the task's hold on ``cluster`` (no-op if it holds none there)."""
        if self._fleet.reservation_cluster(req.task_id) == cluster:
            self._fleet.release(req.task_id)
