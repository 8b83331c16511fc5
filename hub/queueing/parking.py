"""Parking: queued tasks no cluster could take even empty, set aside until that can change.

When more is asked than the fleet has, a queue can hold thousands of tasks that no cluster
could run even with nothing running on it (a GPU model no member has, more cards than any
node holds, a selector no node matches). Every cycle tried them all again (a head that
could never fit does not hold its queue, and the kept misses of ``hub.placement.misses``
are dropped at every change of the fleet, so each was decided anew): with 20,000 such tasks
waiting, six times the placement loop's CPU for each task it did place
(``docs/benchmarks.md``, "A backlog"). kube-scheduler moves such pods to its unschedulable
queue until a cluster event could make them fit; Kueue's best-effort FIFO sets inadmissible
workloads aside the same way. Here:

- after a miss, ``consider`` asks whether any cluster could take the task empty - the real
  fit code on a scratch copy with every node free (``Planner.fits_empty``), per request
  shape and cluster, kept while that cluster's ``capacity_version`` and
  ``settings_version`` stand; if none could, the task is parked;
- the next cycles leave the parked tasks out (set aside in the task map at the end of the
  cycle, ``flush``: the cycle's lanes no longer hold them, ``hub.taskorder``) while the fleet's
  ``offer_version`` stands (no cluster joined or left, no cluster's nodes offer other
  amounts, labels or devices, no cluster's settings changed) and the task is the same
  object (a changed spec or priority files a new one). The first such change returns every
  parked task to the cycle, to be decided afresh in its place.

A parked task keeps its queue position and the reason its last miss gave; it does not hold
its queue's head (waiting there for room could not help it). Not parked: tasks that ask for
a share of device memory (``hub.placement.memshare`` tries one request per card size) and
tasks that may be split (``ActiveTask.divisible``), and tasks whose node selector names a
per-node label key (``kubernetes.io/hostname``, ``nvidia.com/gfd.timestamp``: their values
change without moving ``capacity_version``, or GPU feature discovery's minutely timestamps
would wake every parked task every minute) across clusters (their parts may fit where the
whole does not). A parked task never fits anywhere: with nothing running a cluster offers
the most it ever can, so a task that fits no empty cluster fits no cluster now
(``tests/queueing/test_parking.py`` holds that against the engine's own decisions).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol

from hub.activetask import ActiveTask
from hub.fleet import ClusterInfo, FleetView
from hub.placement.framework import PlacementRequest

FitsEmpty = Callable[[ClusterInfo, PlacementRequest], bool]

_KEPT = 4096    # (shape, cluster) verdicts and shapes kept; more: start over
_ASKED = 65536  # requests whose answer is kept; more: start over


def shape_of(req: PlacementRequest) -> tuple[Hashable, ...]:
    """What "could this ever fit?" reads of a request: all of it but the task's id and name
    and the clusters it excludes (asked of every cluster: an exclusion can be lifted)."""
    return (req.selector_key, req.requests, req.cluster_key, req.priority, req.failover)


class Shelf(Protocol):
    """Where parked tasks are kept out of the cycles' lanes: ``ActiveTasks`` (``set_aside``,
    ``hub.taskorder``), so a cycle does not even pass over them."""

    def set_aside(self, tasks: Iterable[ActiveTask]) -> None: ...
    def restore(self) -> None: ...
    def is_aside(self, task: ActiveTask) -> bool: ...
    def aside_count(self) -> int: ...


class Parking:
    """The parked tasks, and whether a request shape could fit each cluster empty."""

    def __init__(self, fleet: FleetView, fits_empty: FitsEmpty, shelf: Shelf) -> None:
        self.fleet = fleet
        self._fits_empty = fits_empty
        self._shelf = shelf
        # (shape, cluster name) -> (cluster, capacity_version, settings_version, answer)
        self._verdicts: dict[tuple[Hashable, str], tuple[ClusterInfo, int, int, bool]] = {}
        self._never: dict[Hashable, bool] = {}       # shape -> fits no cluster (at _stamp)
        # id(request) -> (request, never): a task missing cycle after cycle asks with the
        # same request object (``ActiveTask.request``); kept alive here, so ids are not reused
        self._asked: dict[int, tuple[PlacementRequest, bool]] = {}
        self._pending: dict[str, ActiveTask] = {}     # parked this cycle, shelved at flush
        self._stamp: tuple[object, int] | None = None  # the fleet's offer_version of both

    def __len__(self) -> int:
        """How many tasks are parked now."""
        self._current()
        return self._shelf.aside_count() + len(self._pending)

    def could_fit(self, cluster: ClusterInfo, request: PlacementRequest) -> bool:
        """Would ``request`` fit ``cluster`` with nothing running there? Kept per request
        shape while the cluster's capacity and settings stand."""
        key = (shape_of(request), cluster.name)
        known = self._verdicts.get(key)
        if (known is not None and known[0] is cluster
                and known[1] == cluster.capacity_version
                and known[2] == cluster.settings_version):
            return known[3]
        answer = self._fits_empty(cluster, request)
        if len(self._verdicts) >= _KEPT:
            self._verdicts.clear()
        self._verdicts[key] = (cluster, cluster.capacity_version, cluster.settings_version,
                               answer)
        return answer

    def consider(self, task: ActiveTask) -> bool:
        """After ``task`` missed: park it if no cluster could take it empty. True if parked
        (it leaves the lanes at ``flush``, the end of the cycle)."""
        self._current()
        request = task.request()
        known = self._asked.get(id(request))
        if known is not None and known[0] is request:   # it missed before: same answer
            never = known[1]
        else:
            never = self._never_fits(task, request)
            if len(self._asked) >= _ASKED:
                self._asked.clear()
            self._asked[id(request)] = (request, never)
        if never:
            self._pending[task.id] = task
        return never

    def _never_fits(self, task: ActiveTask, request: PlacementRequest) -> bool:
        """``consider``'s question for a request not asked since the fleet's offer moved."""
        if request.requests.gpu_mem_mib or task.divisible or self._per_node(request):
            return False
        shape = shape_of(request)
        never = self._never.get(shape)
        if never is None:
            never = not any(self.could_fit(c, request) for c in self.fleet.ordered)
            if len(self._never) >= _KEPT:
                self._never.clear()
            self._never[shape] = never
        return never

    def _per_node(self, request: PlacementRequest) -> bool:
        """Does the request's node selector name a per-node label key (a hostname)? Those
        values may change without moving ``capacity_version``."""
        keys = self.fleet.per_node_label_keys
        return any(r.key in keys for r in request.selector.requirements)

    def flush(self) -> None:
        """Shelve the tasks parked since the last flush (once a cycle: one pass)."""
        if self._pending:
            self._shelf.set_aside(self._pending.values())
            self._pending.clear()

    def refresh(self) -> None:
        """Return every parked task to the lanes if the fleet's offer moved (a cycle asks
        this before it takes the lanes)."""
        self._current()

    def parked(self, task: ActiveTask) -> bool:
        """True while ``task`` (this very object) is parked."""
        self._current()
        return self._pending.get(task.id) is task or self._shelf.is_aside(task)

    def waiting(self, queued: Sequence[ActiveTask]) -> list[ActiveTask]:
        """``queued`` without the tasks parked, in its order."""
        return [t for t in queued if not self.parked(t)]

    def _current(self) -> None:
        """Return every parked task and forget the shape verdicts if the fleet's offer
        moved."""
        stamp = self.fleet.offer_version
        old = self._stamp
        if old is not None and old[0] is stamp[0] and old[1] == stamp[1]:
            return
        self._stamp = stamp
        self._shelf.restore()
        self._pending.clear()
        self._never.clear()
        self._asked.clear()
