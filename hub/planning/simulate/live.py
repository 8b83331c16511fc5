"""``--from-hub`` / ``--queue``: the live fleet and pending queue as simulation inputs.

Called by ``fuyaoctl simulate`` with its SDK client (any object with ``list_clusters``,
``cluster_nodes`` and ``list_tasks`` as ``fuyaoctl.Client`` has them: the engine never
imports the CLI). Only clusters open to placement (Ready, not cordoned) are taken, with
their nodes as they stand - what running tasks use stays used - and their weight, headroom
and labels; queued tasks keep their specs, named by task id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo
from fuyao.spec import ClusterState, ClusterView, TaskState, TaskView
from hub.planning.simulate.fleet import SimCluster
from hub.planning.simulate.workload import SimTask, tasks_from_specs


class HubReader(Protocol):
    """What the simulator reads from a hub (``fuyaoctl.Client`` satisfies it)."""

    def list_clusters(self) -> list[ClusterView]:
        """Every member cluster."""
        ...

    def cluster_nodes(self, name: str) -> list[NodeInfo]:
        """A cluster's nodes."""
        ...

    def list_tasks(self, *, state: TaskState | str | None = None,
                   cluster: str | None = None) -> list[TaskView]:
        """Tasks, optionally in one state."""
        ...


def live_fleet(hub: HubReader) -> list[SimCluster]:
    """The hub's schedulable clusters with their nodes as they stand."""
    out = [SimCluster(view.name, tuple(hub.cluster_nodes(view.name)), view.weight,
                      view.headroom, dict(view.labels))
           for view in hub.list_clusters()
           if view.state is ClusterState.READY and not view.cordoned]
    if not out:
        raise InvalidInput("--from-hub: the hub has no Ready, uncordoned cluster")
    return out


def live_queue(hub: HubReader) -> list[SimTask]:
    """The hub's queued tasks, oldest first, each named by its id."""
    views: Sequence[TaskView] = sorted(hub.list_tasks(state=TaskState.QUEUED),
                                       key=lambda v: (v.created_at, v.id))
    if not views:
        raise InvalidInput("--queue: the hub has no queued task")
    return tasks_from_specs([v.spec.model_copy(update={"name": v.id}) for v in views],
                            "the hub's queue")
