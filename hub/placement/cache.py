"""The scheduler's caches: per request shape every cluster's verdict, per cluster its fits.

``Scheduler`` (``hub.placement.scheduler``) keeps two levels, both dropped with
``Scheduler(..., cache=False)``:

- ``ShapeTable``: for one request shape (selector, requests, priority, failover), each
  cluster's filter status, fit and raw scores, in the fleet's cluster order, current to a
  fleet tick. A decision re-judges only the clusters ``FleetView.changed_since`` that tick
  (any change to a cluster moves its ``version``), then ranks from the table's columns -
  or from its ``Ranking`` (``hub.placement.ranking``), totals kept current on change.
  Re-judging re-runs only the plugins whose ``Depends`` says the change may move their
  answer: with the cluster's settings and its kept fit unchanged (``settings``, ``fits``),
  only ``Depends.ANY`` ones (Headroom: the used amounts a reservation moved). Tables of
  one shape that differ only in what plugins read of priority and failover (``variant``)
  are siblings: a cluster one of them judged since it last changed is re-judged in another
  by re-running only the plugins whose variants differ.
  A decision's result reads the table's own containers (``lend``), not copies: the table
  copies them first (``own``) only if it is about to change while that result is alive.
- ``FitCache``: per cluster and (selector, requests), the fit search's answer, valid while
  the cluster's ``layout_version`` and the ``model_version`` of every model the search read
  (``hub.fleet.fit_models``) stay put - or, for a one-replica answer of the ``tightest``
  search, while the nodes that changed since could not now be chosen before it
  (``hub.fleet.certify``/``still_found``: a reservation or report elsewhere in the
  cluster rarely moves it). A re-judged cluster reuses it - so a reservation on
  an H100 node re-runs the cheap plugins for a V100 request but not its fit search - and the
  priority and failover variants of one request share it.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping
from itertools import compress
from typing import Final

from hub.fleet import (
    Certificate,
    ClusterInfo,
    Fit,
    FleetView,
    Miss,
    certify,
    fit_models,
    still_found,
)
from hub.placement.framework import SUCCESS, PlacementRequest, Status
from hub.placement.lent import Journal, LentStatuses, Statuses
from hub.placement.ranking import Ranking
from hub.placement.result import Row, ScoreTable

_FITS_PER_CLUSTER: Final = 512

# answer, cluster version it was found at, models read, certificate, version checked up to
FitEntry = tuple[Fit | Miss, int, tuple[str, ...], Certificate | None, int]


class ShapeTable:
    """One request shape's verdicts, aligned with the fleet's clusters (sorted by name)."""

    __slots__ = (
        "clusters", "fit_id", "fits", "fixed", "frees", "lent", "names", "oks", "positions",
        "ranking", "raws", "recording", "redo", "seen", "settings", "siblings", "statuses",
        "variant",
    )

    def __init__(
        self, clusters: tuple[ClusterInfo, ...], positions: dict[str, int], fit_id: int,
        seen: int,
    ) -> None:
        count = len(clusters)
        self.clusters = clusters
        self.positions = positions            # name -> index (shared by tables of clusters)
        self.fit_id = fit_id
        self.names = [c.name for c in clusters]
        self.seen = seen                      # the fleet tick the verdicts are current to...
        self.redo = set(range(count))         # ... except these (never judged, or an error)
        self.statuses = Statuses(dict.fromkeys(self.names, SUCCESS))   # in order
        self.oks = [False] * count            # passed every filter and was scored
        self.raws: list[tuple[float, ...]] = [()] * count
        self.fixed = [0.0] * count            # weighted sum of the scores not normalized
        self.fits: list[Fit | Miss | None] = [None] * count
        self.settings = [-1] * count          # the cluster's settings_version at its verdict
        self.variant: tuple[Hashable, ...] = ()   # what plugins read of priority/failover
        self.siblings: list[ShapeTable] = []  # tables of the same shape but the variant
        self.ranking: Ranking | None = None   # totals kept current (set by the scheduler)
        self.frees: list[tuple[int, int]] = [(0, 0)] * count   # (version, free_for) if asked
        self.lent: list[weakref.ref[Journal]] = []   # decisions lent, maybe still read
        self.recording: list[Journal] = []           # ... the ones alive (while changing)

    def due(self, fleet: FleetView) -> list[int]:
        """Indices to judge now (changed since ``seen``, or to redo); then current to now."""
        changed = fleet.changed_since(self.seen)
        self.seen = fleet.tick
        positions = self.positions
        due = [positions[c.name] for c in changed]   # distinct: one entry a cluster
        if self.redo:
            due = sorted(self.redo.union(due))
            self.redo = set()
        else:
            due.sort()
        return due

    def lend(self, plugins: tuple[str, ...]) -> tuple[Mapping[str, Status], ScoreTable]:
        """This decision's statuses and (ranked) score table, read from the table's own
        containers through a ``Journal`` that keeps the rows the table changes later."""
        ranking = self.ranking
        assert ranking is not None
        self.recording = []   # this decision's changes are made: hold no journal alive
        ranking.save = None
        journal = Journal()
        table = ScoreTable.aligned(plugins, self.names, self.oks, self.raws,
                                   ranking.aligned(), ranking.totals, journal.rows)
        self.lent.append(weakref.ref(journal))
        return LentStatuses(self.names, self.statuses, journal), table

    def own(self) -> None:
        """About to change: note which lent decisions are still alive (``save`` keeps
        their rows before a change)."""
        recording = self.recording = [j for ref in self.lent if (j := ref()) is not None]
        if len(recording) != len(self.lent):
            self.lent = [weakref.ref(j) for j in recording]
        if self.ranking is not None:
            self.ranking.save = self.save if recording else None

    def save(self, index: int) -> None:
        """Row ``index`` is about to change: keep it as it is for each live lent decision."""
        row: Row | None = None
        for journal in self.recording:
            if index not in journal.rows:
                if row is None:
                    ranking = self.ranking
                    assert ranking is not None
                    row = (self.statuses[self.names[index]], self.oks[index],
                           self.raws[index], *ranking.row(index))
                journal.rows[index] = row

    def current(self, index: int, cluster: ClusterInfo) -> bool:
        """True when this table's verdict on ``clusters[index]`` is of its state now."""
        return (self.settings[index] == cluster.settings_version
                and cluster.version <= self.seen and index not in self.redo)

    def forget(self, index: int) -> None:
        """Judge this cluster again next time (its verdict is an error, or was not made)."""
        self.redo.add(index)
        self.settings[index] = -1   # ... in full

    def detached(self) -> ShapeTable:
        """A copy for one decision (its changes are not kept)."""
        copy = ShapeTable((), self.positions, self.fit_id, self.seen)
        copy.clusters, copy.names, copy.redo = self.clusters, self.names, set(self.redo)
        copy.statuses, copy.oks = Statuses(self.statuses), list(self.oks)
        copy.raws, copy.fits, copy.fixed = list(self.raws), list(self.fits), list(self.fixed)
        copy.settings = list(self.settings)
        copy.variant, copy.siblings = self.variant, []
        copy.ranking = None   # a one-off decision ranks on the full path
        copy.frees = self.frees   # by cluster version: the same whatever is excluded
        copy.lent, copy.recording = [], []
        return copy

    def feasible(self) -> tuple[list[str], list[tuple[float, ...]], list[float]]:
        """Names, raw score rows and fixed sums of the clusters that passed and were scored."""
        oks = self.oks
        return (list(compress(self.names, oks)), list(compress(self.raws, oks)),
                list(compress(self.fixed, oks)))

    def passed(self) -> list[ClusterInfo]:
        """The clusters whose filters all passed."""
        return [c for c, s in zip(self.clusters, self.statuses.values(), strict=True) if s.ok]


class FitCache:
    """Fit search answers per cluster and (selector, requests), checked against model stamps."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, dict[int, FitEntry]] = {}

    def get(self, cluster: ClusterInfo, fit_id: int, req: PlacementRequest,
            ) -> tuple[Fit | Miss, bool] | None:
        """The kept answer if it is still the search's answer, and True when nothing it read
        has changed since (False: nodes it read changed, none in a way that moves it)."""
        per_cluster = self._entries.get(cluster.name)
        if per_cluster is None:
            return None
        entry = per_cluster.get(fit_id)
        if entry is None:
            return None
        found, stamp, models, cert, checked = entry
        if cluster.layout_version > stamp or cluster.settings_version > stamp:
            return None
        versions = cluster.model_versions
        for model in models:
            if versions.get(model, 0) > stamp:
                break
        else:
            return found, True
        now = cluster.version
        if checked == now:
            return found, False
        changed = None if cert is None else cluster.nodes_changed_since(checked)
        if changed is None or cert is None or not still_found(
                cluster, req.selector, req.selector_key, req.requests, cert, changed):
            del per_cluster[fit_id]
            return None
        per_cluster[fit_id] = (found, stamp, models, cert, now)
        return found, False

    def put(self, cluster: ClusterInfo, fit_id: int, req: PlacementRequest,
            found: Fit | Miss, least_overqualified: bool = False) -> None:
        """Keep an answer ``find_fit`` just gave for this cluster as it is now."""
        per_cluster = self._entries.setdefault(cluster.name, {})
        if len(per_cluster) >= _FITS_PER_CLUSTER:
            per_cluster.clear()
        selector, key, requests = req.selector, req.selector_key, req.requests
        models = fit_models(cluster, selector, key, requests, found)
        cert = certify(cluster, selector, key, requests, found, least_overqualified)
        per_cluster[fit_id] = (found, cluster.version, models, cert, cluster.version)

    def prune(self, names: set[str]) -> None:
        """Forget clusters no longer in the fleet."""
        for gone in [n for n in self._entries if n not in names]:
            del self._entries[gone]
