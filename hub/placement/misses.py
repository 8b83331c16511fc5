"""A decision that found no cluster, answered again without deciding while the fleet stands.

When a burst outgrows the fleet, thousands of queued tasks of a few request shapes wait, and
every placement cycle tries them in order (a queue whose head was placed this cycle is not
blocked, so backfill's ``lookahead`` does not bound it): after the freed room is taken, each
of them misses, for the same reasons as the one before it. kube-scheduler sets unschedulable
pods aside until a cluster event that could make them fit; here the same question is
answered without asking the engine: a miss depends only on the request's shape (every field
of ``PlacementRequest`` but the task's id and name - what the engine's own shape tables key
on, with priority and failover whole) and on the fleet, and while no cluster changed
(``FleetView.tick`` and the cluster list the same objects as when it was decided) the same
shape misses again with the same verdicts. So ``Misses.schedule`` keeps each shape's last
miss and hands it out again until the fleet moves; the first change of any cluster (a
reservation, a report, a health state, a cluster joining) drops them all, and the next task
of the shape is decided afresh - in the same cycle, so a task that fits is placed exactly
when it was before. Placements are never kept; a miss with a plugin's ERROR status is not
kept either (the engine re-judges that cluster next time).

Besides the decision, a kept miss saves what a decision leaves alive: each result lends its
shape table's rows through a journal (``ShapeTable.lend``) while it lives, and a cycle keeps
its misses until preemption has seen them - thousands of live journals that every later
change of the table walked and copied rows for.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from hub.fleet import ClusterInfo, FleetView
from hub.placement import memshare
from hub.placement.framework import Code, PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler

_KEPT = 1024    # shapes; more distinct missing shapes than this between fleet changes: start over


def shape_of(req: PlacementRequest) -> tuple[Hashable, ...]:
    """What a decision reads of a request: all of it but the task's id and name."""
    return (req.selector_key, req.requests, req.cluster_key, req.priority, req.failover,
            req.exclude)


class Misses:
    """The last miss of each request shape, per scheduler, while the fleet does not change."""

    def __init__(self, fleet: FleetView) -> None:
        self.fleet = fleet
        self._clusters: tuple[ClusterInfo, ...] = ()
        self._tick = -1
        self._kept: dict[tuple[Hashable, ...],
                         tuple[Scheduler, PlacementRequest, PlacementResult]] = {}
        self.decided = 0     # decisions the engine made through ``schedule`` (tests, benches)
        self.answered = 0    # misses handed out again without one

    def schedule(self, scheduler: Scheduler,
                 req: PlacementRequest) -> tuple[PlacementRequest, PlacementResult]:
        """``memshare.schedule(scheduler, req)``, or the kept miss of ``req``'s shape when the
        fleet has not changed since it was decided (for this task: its own request, with the
        variant's requests a memory-sharing task was decided for)."""
        self._current()
        shape = shape_of(req)
        kept = self._kept.get(shape)
        if kept is not None and kept[0] is scheduler:
            self.answered += 1
            asked = kept[1]
            return (req if asked.requests == req.requests
                    else replace(req, requests=asked.requests)), kept[2]
        self.decided += 1
        asked, result = memshare.schedule(scheduler, req)
        if result.cluster is None and self._current() and not any(
                s.code is Code.ERROR for s in result.statuses.values()):
            if len(self._kept) >= _KEPT:
                self._kept.clear()
            self._kept[shape] = (scheduler, asked, result)
        return asked, result

    def _current(self) -> bool:
        """True if the fleet is as when the kept misses were decided; else forget them."""
        fleet = self.fleet
        clusters, tick = fleet.ordered, fleet.tick
        if clusters is self._clusters and tick == self._tick:
            return True
        self._kept.clear()
        self._clusters, self._tick = clusters, tick
        return False
