"""The cluster scheduler: filter every cluster, score the feasible ones, select the best.

The placement loop calls ``schedule`` for each queued task, then ``reserve`` (or
``FleetView.reserve`` directly) for the chosen cluster. It reads as Karmada's
``generic_scheduler``: find the clusters that fit, prioritize them, select one, return the
nodes the fit found. ``schedule`` is pure - it only reads the fleet view.

Speed: the fleet index makes each plugin call cheap; on top, a cluster's filter verdict and
raw scores for a request shape (selector, requests, priority, failover) are cached until
the cluster changes (every fleet mutation stamps a new ``ClusterInfo.version``), so over
clusters that did not change since the last task of that shape a decision costs a
dictionary lookup per cluster. Filter and score plugins must therefore depend only on the
request and the cluster (``exclude`` is handled outside the cache; cross-cluster ranking
goes in ``normalize``). ``cache=False`` measures or debugs without it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from fuyao.errors import InvalidInput
from fuyao.spec import TaskRequests
from hub.fleet import ClusterInfo, Fit, FleetView, Miss
from hub.placement.framework import (
    MAX_SCORE,
    MIN_SCORE,
    SUCCESS,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    PlacementRequest,
    Plugin,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
)
from hub.placement.plugins.node_fit import fit_for
from hub.placement.profile import DEFAULT_PROFILE, Profile
from hub.placement.registry import DEFAULT_REGISTRY, Registry
from hub.placement.result import FitError, PlacementResult, ScoreTable

log = logging.getLogger(__name__)

_SHAPES_PER_CLUSTER = 256
_SHAPE_IDS = 4096
Shape = tuple[str, TaskRequests, int, bool]


class _Verdict:
    """A cluster's filter status for one request shape, its fit, and its raw scores."""

    __slots__ = ("fit", "raw", "status")

    def __init__(self, status: Status, fit: Fit | Miss | None) -> None:
        self.status = status
        self.fit = fit
        self.raw: tuple[float, ...] | None = None


class Scheduler:
    """Chooses a cluster for one task at a time, as the profile's plugins decide."""

    def __init__(
        self, fleet: FleetView, profile: Profile = DEFAULT_PROFILE, *,
        headroom_priority: int = 1000, registry: Registry = DEFAULT_REGISTRY,
        cache: bool = True,
    ) -> None:
        self.fleet = fleet
        self.profile = profile
        plugins = _Plugins(registry, Handle(fleet, headroom_priority))
        self._filters = tuple(
            (name, cast(FilterPlugin, plugins.get(name, "filter"))) for name in profile.filters
        )
        self._scores = tuple(
            (s.name, s.weight, cast(ScorePlugin, plugins.get(s.name, "score")))
            for s in profile.scores
        )
        self._normalizers = tuple(
            cast(ScoreNormalizer, p) if callable(getattr(p, "normalize", None)) else None
            for _, _, p in self._scores
        )
        self._reserves = tuple(
            (name, cast(ReservePlugin, plugins.get(name, "reserve"))) for name in profile.reserves
        )
        self._cache = cache
        self._shape_ids: dict[Shape, int] = {}
        self._next_shape = itertools.count()
        self._verdicts: dict[str, tuple[int, dict[int, _Verdict]]] = {}

    def schedule(self, req: PlacementRequest) -> PlacementResult:
        """Filter -> score -> select. Reserves nothing."""
        ctx = CycleState()
        clusters = self.fleet.ordered
        verdicts = self._find_feasible(ctx, req, clusters)
        statuses = {c.name: v.status for c, v in zip(clusters, verdicts, strict=True)}
        feasible = [(c, v) for c, v in zip(clusters, verdicts, strict=True) if v.status.ok]
        ctx.feasible = [c for c, _ in feasible]
        table = self._prioritize(ctx, req, feasible, statuses)
        best = self._select(table, statuses)
        if best is None:
            reasons = [s.reason for s in statuses.values() if not s.ok]
            error = FitError.from_reasons(len(clusters), reasons,
                                          _nearest_fit(req, clusters, statuses))
            log.debug("task %s: %s", req.task_id, error.message)
            return PlacementResult(None, (), error, None, statuses, table)
        cluster = self.fleet.cluster(best)
        found = fit_for(ctx, req, cluster) if cluster is not None else None
        fit = found if isinstance(found, Fit) else Fit((), None)
        return PlacementResult(best, fit.nodes, None, fit.model, statuses, table)

    def reserve(self, req: PlacementRequest, result: PlacementResult) -> Status:
        """Run the reserve plugins for a decision; on a failure undo those that ran."""
        fit = result.fit
        if result.cluster is None or fit is None:
            return Status(Code.UNSCHEDULABLE, "no cluster was selected")
        ctx = CycleState()
        done: list[ReservePlugin] = []
        for name, plugin in self._reserves:
            try:
                status = plugin.reserve(ctx, req, result.cluster, fit)
            except Exception as exc:
                status = _plugin_error(name, "reserve", result.cluster, exc)
            if not status.ok:
                for ran in reversed(done):
                    ran.unreserve(ctx, req, result.cluster)
                return status if status.plugin else replace(status, plugin=name)
            done.append(plugin)
        return SUCCESS

    def unreserve(self, req: PlacementRequest, cluster: str) -> None:
        """Run every reserve plugin's ``unreserve`` (idempotent), last first."""
        ctx = CycleState()
        for _, plugin in reversed(self._reserves):
            plugin.unreserve(ctx, req, cluster)

    # -- filter ------------------------------------------------------------------------------

    def _find_feasible(
        self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[ClusterInfo],
    ) -> list[_Verdict]:
        """Every cluster's filter verdict (cached while the cluster does not change)."""
        if not self._cache:
            return [self._run_filters(ctx, req, c) for c in clusters]
        shape = self._shape_id(req)
        if len(self._verdicts) > 2 * len(clusters) + 16:
            self._verdicts = {c.name: self._verdicts[c.name] for c in clusters
                              if c.name in self._verdicts}
        exclude = req.exclude
        return [
            self._run_filters(ctx, req, c) if exclude and c.name in exclude
            else self._cached_filters(ctx, req, c, shape)
            for c in clusters
        ]

    def _shape_id(self, req: PlacementRequest) -> int:
        """A small int per request shape (ids are never reused, so stale entries never match)."""
        shape: Shape = (req.selector_key, req.requests, req.priority, req.failover)
        found = self._shape_ids.get(shape)
        if found is None:
            if len(self._shape_ids) >= _SHAPE_IDS:
                self._shape_ids.clear()
            found = self._shape_ids[shape] = next(self._next_shape)
        return found

    def _cached_filters(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo, shape: int,
    ) -> _Verdict:
        entry = self._verdicts.get(cluster.name)
        if entry is None or entry[0] != cluster.version:
            entry = self._verdicts[cluster.name] = (cluster.version, {})
        verdict = entry[1].get(shape)
        if verdict is not None:
            if verdict.fit is not None:
                ctx.fits[cluster.name] = verdict.fit
            return verdict
        verdict = self._run_filters(ctx, req, cluster)
        if verdict.status.code is not Code.ERROR:
            if len(entry[1]) >= _SHAPES_PER_CLUSTER:
                entry[1].clear()
            entry[1][shape] = verdict
        return verdict

    def _run_filters(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo,
    ) -> _Verdict:
        status = SUCCESS
        for name, plugin in self._filters:
            try:
                status = plugin.filter(ctx, req, cluster)
            except Exception as exc:
                status = _plugin_error(name, "filter", cluster.name, exc)
                break
            if not status.ok:
                if not status.plugin:
                    status = replace(status, plugin=name)
                break
        return _Verdict(status, ctx.fits.get(cluster.name))

    # -- score and select ----------------------------------------------------------------------

    def _prioritize(
        self, ctx: CycleState, req: PlacementRequest,
        feasible: list[tuple[ClusterInfo, _Verdict]], statuses: dict[str, Status],
    ) -> ScoreTable:
        """Per-plugin score columns (normalized where the plugin says) and weighted totals.

        A plugin that raises or scores outside 0..100 turns that cluster into an ERROR.
        """
        names: list[str] = []
        rows: list[tuple[float, ...]] = []
        for cluster, verdict in feasible:
            raw = verdict.raw
            if raw is None:
                raw = self._raw_scores(ctx, req, cluster, statuses)
                if raw is None:
                    continue
                verdict.raw = raw
            names.append(cluster.name)
            rows.append(raw)
        columns: list[list[float]] = []
        totals = [0.0] * len(names)
        for j, (plugin, weight, _) in enumerate(self._scores):
            column = [raw[j] for raw in rows]
            normalizer = self._normalizers[j]
            if normalizer is not None:
                column = self._normalized(ctx, req, plugin, normalizer, names, column, statuses)
            columns.append(column)
            totals = [t + weight * x for t, x in zip(totals, column, strict=True)]
        return ScoreTable(tuple(s[0] for s in self._scores), names, columns, totals)

    def _raw_scores(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo,
        statuses: dict[str, Status],
    ) -> tuple[float, ...] | None:
        raw: list[float] = []
        for (name, _, plugin), normalizer in zip(self._scores, self._normalizers, strict=True):
            try:
                value = plugin.score(ctx, req, cluster)
                if normalizer is None:
                    _check_range(value)
            except Exception as exc:
                statuses[cluster.name] = _plugin_error(name, "score", cluster.name, exc)
                return None
            raw.append(float(value))
        return tuple(raw)

    @staticmethod
    def _normalized(
        ctx: CycleState, req: PlacementRequest, plugin: str, normalizer: ScoreNormalizer,
        names: list[str], column: list[float], statuses: dict[str, Status],
    ) -> list[float]:
        out = list(column)
        try:
            normalizer.normalize(ctx, req, names, out)
            if len(out) != len(names):
                raise ValueError(f"normalize returned {len(out)} scores for {len(names)}")
        except Exception as exc:
            for name in names:
                statuses[name] = _plugin_error(plugin, "normalize", name, exc)
            return column
        if out and (min(out) < MIN_SCORE or max(out) > MAX_SCORE):
            for name, value in zip(names, out, strict=True):
                try:
                    _check_range(value)
                except ValueError as exc:
                    statuses[name] = _plugin_error(plugin, "normalize", name, exc)
        return out

    @staticmethod
    def _select(table: ScoreTable, statuses: dict[str, Status]) -> str | None:
        """Highest total; ties go to the first name (clusters come sorted by name)."""
        best: str | None = None
        best_total = float("-inf")
        for name, total in zip(table.clusters, table.totals, strict=True):
            if total > best_total and statuses[name].ok:
                best, best_total = name, total
        return best


def _nearest_fit(
    req: PlacementRequest, clusters: Sequence[ClusterInfo], statuses: dict[str, Status],
) -> str | None:
    """The open, rejected-for-room cluster with most free devices (or cpu) its nodes match."""
    best: str | None = None
    most = 0
    for cluster in clusters:
        if (statuses[cluster.name].code is not Code.UNSCHEDULABLE or not cluster.schedulable
                or cluster.name in req.exclude):
            continue
        free = cluster.free_for(req.selector, req.selector_key, req.requests)
        if free > most:
            best, most = cluster.name, free
    return best


def _check_range(value: float) -> None:
    if not MIN_SCORE <= value <= MAX_SCORE:
        raise ValueError(f"score {value!r} outside {MIN_SCORE:g}..{MAX_SCORE:g}")


def _plugin_error(plugin: str, point: str, cluster: str, exc: Exception) -> Status:
    """A plugin raised: a bug. Log it, and reject this cluster with an ERROR status."""
    log.error("placement plugin %s %s failed on cluster %s", plugin, point, cluster,
              exc_info=exc)
    return Status(Code.ERROR, f"internal error in {plugin}: {type(exc).__name__}: {exc}", plugin)


class _Plugins:
    """Builds each named plugin once and checks it has the extension point a profile uses."""

    def __init__(self, registry: Registry, handle: Handle) -> None:
        self._registry = registry
        self._handle = handle
        self._built: dict[str, Plugin] = {}

    def get(self, name: str, point: str) -> Plugin:
        plugin = self._built.get(name)
        if plugin is None:
            factory = self._registry.get(name)
            if factory is None:
                raise InvalidInput(f"placement profile: unknown plugin {name!r}")
            plugin = self._built[name] = factory(self._handle)
        if not callable(getattr(plugin, point, None)):
            raise InvalidInput(f"placement profile: plugin {name} has no {point} extension point")
        return plugin
