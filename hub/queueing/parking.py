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
- ``waiting`` leaves the parked tasks out of the next cycles while the fleet's
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

from collections.abc import Callable, Hashable, Sequence

from hub.activetask import ActiveTask
from hub.fleet import ClusterInfo, FleetView
from hub.placement.framework import PlacementRequest

FitsEmpty = Callable[[ClusterInfo, PlacementRequest], bool]

_KEPT = 4096    # (shape, cluster) verdicts and shapes kept; more: start over


def shape_of(req: PlacementRequest) -> tuple[Hashable, ...]:
    """What "could this ever fit?" reads of a request: all of it but the task's id and name
    and the clusters it excludes (asked of every cluster: an exclusion can be lifted)."""
    return (req.selector_key, req.requests, req.cluster_key, req.priority, req.failover)


class Parking:
    """The parked tasks, and whether a request shape could fit each cluster empty."""

    def __init__(self, fleet: FleetView, fits_empty: FitsEmpty) -> None:
        self.fleet = fleet
        self._fits_empty = fits_empty
        # (shape, cluster name) -> (cluster, capacity_version, settings_version, answer)
        self._verdicts: dict[tuple[Hashable, str], tuple[ClusterInfo, int, int, bool]] = {}
        self._never: dict[Hashable, bool] = {}       # shape -> fits no cluster (at _stamp)
        self._parked: dict[str, ActiveTask] = {}      # task id -> the task as parked
        self._stamp: tuple[object, int] | None = None  # the fleet's offer_version of both

    def __len__(self) -> int:
        """How many tasks are parked now (stale entries dropped at the next ``waiting``)."""
        self._current()
        return len(self._parked)

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
        """After ``task`` missed: park it if no cluster could take it empty. True if parked."""
        request = task.request()
        if request.requests.gpu_mem_mib or task.divisible or self._per_node(request):
            return False
        self._current()
        shape = shape_of(request)
        never = self._never.get(shape)
        if never is None:
            never = not any(self.could_fit(c, request) for c in self.fleet.ordered)
            if len(self._never) >= _KEPT:
                self._never.clear()
            self._never[shape] = never
        if never:
            self._parked[task.id] = task
        return never

    def _per_node(self, request: PlacementRequest) -> bool:
        """Does the request's node selector name a per-node label key (a hostname)? Those
        values may change without moving ``capacity_version``."""
        keys = self.fleet.per_node_label_keys
        return any(r.key in keys for r in request.selector.requirements)

    def parked(self, task: ActiveTask) -> bool:
        """True while ``task`` (this very object) is parked."""
        self._current()
        return self._parked.get(task.id) is task

    def waiting(self, queued: Sequence[ActiveTask]) -> Sequence[ActiveTask]:
        """``queued`` without the tasks parked (in its order); entries of tasks no longer
        queued as parked are dropped."""
        self._current()
        parked = self._parked
        if not parked:
            return queued
        get = parked.get
        out = [t for t in queued if get(t.id) is not t]
        if len(out) + len(parked) != len(queued):    # some entry is stale: keep the live ones
            live = {t.id: t for t in queued}
            self._parked = {i: t for i, t in parked.items() if live.get(i) is t}
        return out

    def _current(self) -> None:
        """Forget every parked task and shape verdict if the fleet's offer moved."""
        stamp = self.fleet.offer_version
        old = self._stamp
        if old is not None and old[0] is stamp[0] and old[1] == stamp[1]:
            return
        self._stamp = stamp
        self._parked.clear()
        self._never.clear()

