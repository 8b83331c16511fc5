"""The cluster scheduler: filter every cluster, score the feasible ones, select the best.

The placement loop calls ``schedule`` for each queued task, then ``reserve`` (or
``FleetView.reserve`` directly) for the chosen cluster. It reads as Karmada's
``generic_scheduler``: find the clusters that fit, prioritize them, select one, return the
nodes the fit found. ``schedule`` is pure - it only reads the fleet view.

Speed: the fleet index makes each plugin call cheap; on top, every cluster's filter status
and raw scores for a request shape (selector, requests, priority, failover) are kept in a
``ShapeTable`` until the cluster changes (every fleet mutation stamps a new
``ClusterInfo.version``), and fit searches in a ``FitCache`` until a node they read changes
(``hub.placement.cache``). A decision re-judges only the clusters that changed since the last
task of its shape, mostly without searching again. Filter and score plugins must therefore
depend only on the request and the cluster (``exclude`` is handled outside the cache;
cross-cluster ranking goes in ``normalize``). ``cache=False`` measures or debugs without it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from itertools import repeat
from operator import add, itemgetter, mul
from typing import Final, cast

from fuyao.errors import InvalidInput
from fuyao.spec import TaskRequests
from hub.fleet import ClusterInfo, Fit, FleetView
from hub.placement.cache import FitCache, ShapeTable
from hub.placement.framework import (
    MAX_SCORE,
    MIN_SCORE,
    SUCCESS,
    Code,
    ColumnNormalizer,
    CycleState,
    Depends,
    FilterPlugin,
    Handle,
    PlacementRequest,
    Plugin,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
    depends,
    variant_of,
)
from hub.placement.plugins.node_fit import fit_for
from hub.placement.profile import DEFAULT_PROFILE, LEAST_OVERQUALIFIED, Profile
from hub.placement.ranking import Column, Ranking
from hub.placement.registry import DEFAULT_REGISTRY, Registry
from hub.placement.result import FitError, PlacementResult, ScoreTable

# Enum members read per judged cluster, taken once: from compiled code ``Depends.ANY`` is a
# lookup through the enum's metaclass ``__getattr__`` hook (about 0.2 us), a name is not.
_ANY: Final = Depends.ANY
_NODES: Final = Depends.NODES
_FIT: Final = Depends.FIT
_ERROR: Final = Code.ERROR

log = logging.getLogger(__name__)

_SHAPES_KEPT: Final = 1024
_SUCCESS: Final = SUCCESS   # a C static, not a read of the module's dict
Base = tuple[str, TaskRequests, str]   # selector, requests, cluster constraints
Shape = tuple[Base, tuple[Hashable, ...]]   # + what the plugins read of priority/failover
FitKey = tuple[str, TaskRequests]


class Scheduler:
    """Chooses a cluster for one task at a time, as the profile's plugins decide."""

    def __init__(
        self, fleet: FleetView, profile: Profile = DEFAULT_PROFILE, *,
        headroom_priority: int = 1000, registry: Registry = DEFAULT_REGISTRY,
        cache: bool = True,
    ) -> None:
        self.fleet = fleet
        self.profile = profile
        self._least_overqualified = profile.model_choice == LEAST_OVERQUALIFIED
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
        # Hot path: bound methods, and which scores go straight into the fixed sum.
        self._filter_calls = tuple((name, plugin.filter) for name, plugin in self._filters)
        self._score_calls = tuple(
            (name, plugin.score, normalizer is None)
            for (name, _, plugin), normalizer in zip(self._scores, self._normalizers, strict=True)
        )
        self._plain_weights = tuple(
            (j, weight) for j, ((_, weight, _), normalizer)
            in enumerate(zip(self._scores, self._normalizers, strict=True)) if normalizer is None
        )
        self._plugin_names = tuple(name for name, _, _ in self._scores)
        # What a re-judge must run again, by what changed (``Depends``): from which filter
        # on, and which scores (``_rerun``); a kept rejection before that filter stands.
        filter_levels = [depends(plugin) for _, plugin in self._filters]
        self._filter_at = {name: k for k, (name, _) in enumerate(self._filters)}
        self._rerun = {
            level: (next((k for k, d in enumerate(filter_levels) if d >= level),
                         len(filter_levels)),
                    tuple(j for j, (_, _, plugin) in enumerate(self._scores)
                          if depends(plugin) >= level))
            for level in (Depends.FIT, Depends.NODES, Depends.ANY)
        }
        # What of a request's priority and failover each plugin reads (``variant_of``), and
        # for two variants, what a table re-runs to take a cluster's verdict from the other.
        plugins_in_order = list({id(p): p for p in [plugin for _, plugin in self._filters]
                                 + [plugin for _, _, plugin in self._scores]}.values())
        self._variants = tuple(
            (plugin, found) for plugin in plugins_in_order
            if (found := variant_of(plugin)) is not None)
        self._across: dict[tuple[tuple[Hashable, ...], tuple[Hashable, ...]],
                           tuple[int, tuple[int, ...]]] = {}
        self._siblings: dict[Base, list[ShapeTable]] = {}
        # Totals kept between decisions (``Ranking``) when every normalizer allows it.
        columns = [(j, weight, normalizer) for j, ((_, weight, _), normalizer)
                   in enumerate(zip(self._scores, self._normalizers, strict=True))
                   if normalizer is not None]
        self._columns: tuple[Column, ...] | None = tuple(
            (j, weight, cast(ColumnNormalizer, normalizer)) for j, weight, normalizer in columns
        ) if all(_by_column(n) for _, _, n in columns) else None
        self._tables: dict[Shape, ShapeTable] | None = {} if cache else None
        self._fits = FitCache()
        self._fit_ids: dict[FitKey, int] = {}
        self._next_fit_id = itertools.count()
        self._positions_of: tuple[tuple[ClusterInfo, ...], dict[str, int]] = ((), {})

    def forget(self) -> None:
        """Drop every kept shape table (a planning answer's scheduler, done with its copy of
        the fleet): a table lists its siblings, itself among them, so dropped with the
        scheduler the tables - and the clusters they hold - wait for the cyclic collector."""
        for siblings in self._siblings.values():
            siblings.clear()
        self._siblings.clear()
        if self._tables is not None:
            self._tables.clear()

    def schedule(self, req: PlacementRequest) -> PlacementResult:
        """Filter -> score -> select. Reserves nothing."""
        ctx = CycleState(self._least_overqualified)
        clusters = self.fleet.ordered
        judged, errors = self._find_feasible(ctx, req, clusters)
        ctx.defer_feasible(judged.passed)
        table, statuses, index = self._prioritize(ctx, req, judged, errors)
        if index is None:
            reasons = [s.reason for s in statuses.values() if not s.ok]
            error = FitError.from_reasons(len(clusters), reasons,
                                          _nearest_fit(req, clusters, statuses, judged.frees))
            log.debug("task %s: %s", req.task_id, error.message)
            return PlacementResult(None, (), error, None, statuses, table)
        found = judged.fits[index]
        if found is None:
            found = fit_for(ctx, req, clusters[index])
        fit = found if isinstance(found, Fit) else Fit((), None)
        return PlacementResult(judged.names[index], fit.nodes, None, fit.model, statuses, table)

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

    # -- filter (and raw scores) -------------------------------------------------------------

    def _find_feasible(
        self, ctx: CycleState, req: PlacementRequest, clusters: tuple[ClusterInfo, ...],
    ) -> tuple[ShapeTable, dict[str, Status]]:
        """Every cluster's verdict (kept where the cluster did not change, others anew), and
        the ERROR statuses of clusters whose score plugins raised this time."""
        if self._tables is None:
            table = ShapeTable(clusters, self._positions(clusters), 0, 0)
            return table, self._judge(ctx, req, table, range(len(clusters)), keep=False)
        table = self._table(req, clusters)
        due = table.due(self.fleet)
        exclude = req.exclude
        if exclude:   # judged below without keeping; judged again when no longer excluded
            for i in [i for i in due if table.names[i] in exclude]:
                due.remove(i)
                table.forget(i)
        if due:
            table.own()
        errors = self._judge(ctx, req, table, due, keep=True) if due else {}
        if not exclude:
            return table, errors
        table = table.detached()
        again = [i for i, name in enumerate(table.names) if name in exclude]
        errors.update(self._judge(ctx, req, table, again, keep=False))
        return table, errors

    def _table(self, req: PlacementRequest, clusters: tuple[ClusterInfo, ...]) -> ShapeTable:
        """The shape's table, new when the fleet's cluster list changed since."""
        assert self._tables is not None
        base: Base = (req.selector_key, req.requests, req.cluster_key)
        variant = tuple([read(req) for _, read in self._variants])
        shape: Shape = (base, variant)
        table = self._tables.get(shape)
        if table is not None and table.clusters is clusters:
            return table
        if table is None and len(self._tables) >= _SHAPES_KEPT:
            self._tables.clear()
            self._siblings.clear()
        if table is not None:   # a cluster joined or left: drop what belonged to gone ones
            self._fits.prune({c.name for c in clusters})
        fit_key: FitKey = (req.selector_key, req.requests)
        fit_id = self._fit_ids.get(fit_key)
        if fit_id is None:
            if len(self._fit_ids) >= _SHAPES_KEPT:
                self._fit_ids.clear()   # ids are never reused: old entries just go unread
            fit_id = self._fit_ids[fit_key] = next(self._next_fit_id)
        table = self._tables[shape] = ShapeTable(clusters, self._positions(clusters), fit_id,
                                                 self.fleet.tick)
        table.variant = variant
        siblings = self._siblings.setdefault(base, [])
        siblings[:] = [t for t in siblings if t.clusters is clusters]
        table.siblings = siblings
        siblings.append(table)
        if self._columns is not None:
            table.ranking = Ranking(len(clusters), self._columns)
        return table

    def _rerun_across(self, mine: tuple[Hashable, ...], theirs: tuple[Hashable, ...],
                      ) -> tuple[int, tuple[int, ...]]:
        """From which filter on, and which scores, a table of variant ``mine`` re-runs on a
        current verdict of variant ``theirs`` (the plugins whose variants differ)."""
        key = (mine, theirs)
        found = self._across.get(key)
        if found is None:
            differ = {id(plugin) for (plugin, _), a, b in zip(self._variants, mine, theirs,
                                                              strict=True) if a != b}
            start = next((k for k, (_, plugin) in enumerate(self._filters)
                          if id(plugin) in differ), len(self._filters))
            scores = tuple(j for j, (_, _, plugin) in enumerate(self._scores)
                           if id(plugin) in differ)
            found = self._across[key] = (start, scores)
        return found

    def _positions(self, clusters: tuple[ClusterInfo, ...]) -> dict[str, int]:
        """Name -> index in ``clusters`` (kept for the fleet's current cluster list)."""
        if self._positions_of[0] is not clusters:
            self._positions_of = (clusters, {c.name: i for i, c in enumerate(clusters)})
        return self._positions_of[1]

    def _judge(
        self, ctx: CycleState, req: PlacementRequest, table: ShapeTable, indices: Sequence[int],
        *, keep: bool,
    ) -> dict[str, Status]:
        """Run the filters, then the scores of those that pass, for these clusters; return
        the ERROR status of each whose scoring raised (not kept: it is judged again).

        ``keep``: reuse and keep fit searches in the ``FitCache``. A cluster whose verdict is
        an error is judged again next time. A kept verdict whose cluster kept its settings
        is re-judged only as far as ``Depends`` asks: from the first filter that may answer
        otherwise (an earlier rejection stands), and the scores that may move.
        """
        clusters, statuses, oks, fits = table.clusters, table.statuses, table.oks, table.fits
        settings, raws = table.settings, table.raws
        fit_cache = self._fits   # called as a method, not a bound one: a compiled call
        ranking = table.ranking
        filter_at, rerun = self._filter_at, self._rerun
        siblings = [t for t in table.siblings if t is not table] if keep else []
        searched: list[int] = []
        # index, the scores to re-run on ``source`` (None: all), was ok, source raw scores
        passed: list[tuple[int, tuple[int, ...] | None, bool, tuple[float, ...]]] = []
        save = table.save if table.recording else None
        found_fits = ctx.fits   # one read of the cycle state's slot, not one per cluster
        for i in indices:
            if save is not None:
                save(i)
            cluster = clusters[i]
            name = cluster.name
            was_ok = oks[i]
            got = fit_cache.get(cluster, table.fit_id, req) if keep else None
            kept = None if got is None else got[0]
            if kept is not None:
                found_fits[name] = kept
            else:
                searched.append(i)
            now = cluster.settings_version
            redo: tuple[int, ...] | None = None
            source = table
            if keep and settings[i] == now and got is not None and (
                    kept is fits[i] or kept == fits[i]):
                # the same answer: as found when judged (ANY), or nodes it read changed
                start, scores = rerun[_ANY if got[1] and kept is fits[i] else _NODES]
            else:
                start, scores = 0, ()
                for sibling in siblings:
                    if sibling.current(i, cluster):
                        source = sibling
                        start, scores = self._rerun_across(table.variant, sibling.variant)
                        found = sibling.fits[i]
                        if found is not None:
                            found_fits[name] = found
                        break
                else:
                    if keep and settings[i] == now:
                        start, scores = rerun[_FIT]
                    else:
                        start = -1
            if start < 0:
                status = self._run_filters(ctx, req, cluster)
            else:
                status = source.statuses[name]
                # ``is _SUCCESS`` first: the shared success, no attribute read of a Python
                # object; a plugin's own success status still answers ``ok``
                if (status is _SUCCESS or status.ok
                        or filter_at.get(status.plugin, start) >= start):
                    status = self._run_filters(ctx, req, cluster, start)
                if source.oks[i]:
                    redo = scores
            statuses[name] = status
            settings[i] = now if keep else -1
            oks[i] = False
            if status is _SUCCESS or status.ok:
                passed.append((i, redo, was_ok, source.raws[i]))
                continue
            if ranking is not None and was_ok:
                ranking.leave(i, raws[i])
            if status.code is _ERROR:
                table.forget(i)
        if passed:
            ctx.defer_feasible(table.passed)
        errors: dict[str, Status] = {}
        fixed, plain = table.fixed, self._plain_weights
        for i, redo, was_ok, base in passed:
            raw = (self._raw_scores(ctx, req, clusters[i]) if redo is None
                   else self._some_scores(ctx, req, clusters[i], base, redo))
            if not isinstance(raw, tuple):   # a C type check; a Status is a Python class
                errors[clusters[i].name] = raw
                table.forget(i)
                if ranking is not None and was_ok:
                    ranking.leave(i, raws[i])
                continue
            total = 0.0   # the weighted sum of the scores no plugin normalizes
            for j, weight in plain:
                total += weight * raw[j]
            if ranking is not None:
                if was_ok:
                    ranking.update(i, raws[i], raw)
                else:
                    ranking.join(i, raw)
            raws[i], fixed[i], oks[i] = raw, total, True
        for i in indices:
            fits[i] = found_fits.get(clusters[i].name)
        if keep:
            for i in searched:
                found = fits[i]
                if found is not None:
                    self._fits.put(clusters[i], table.fit_id, req, found,
                                   self._least_overqualified)
        return errors

    def _run_filters(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo, start: int = 0,
    ) -> Status:
        """The filters from ``start`` on (those before passed, and would again)."""
        status = _SUCCESS
        calls = self._filter_calls if not start else self._filter_calls[start:]
        for name, run in calls:
            try:
                status = run(ctx, req, cluster)
            except Exception as exc:
                return _plugin_error(name, "filter", cluster.name, exc)
            if status is not _SUCCESS and not status.ok:
                return status if status.plugin else replace(status, plugin=name)
        return status

    def _some_scores(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo,
        kept: tuple[float, ...], redo: tuple[int, ...],
    ) -> tuple[float, ...] | Status:
        """``kept`` with the scores at ``redo`` run again (the others read nothing that
        changed), or the ERROR status of the first that failed."""
        if not redo:
            return kept
        raw = list(kept)
        calls = self._score_calls
        same = True
        for j in redo:
            name, run, checked = calls[j]
            try:
                value = float(run(ctx, req, cluster))
                if checked and not MIN_SCORE <= value <= MAX_SCORE:
                    _check_range(value)
            except Exception as exc:
                return _plugin_error(name, "score", cluster.name, exc)
            if value != raw[j]:
                raw[j] = value
                same = False
        # the scores as they were: ``kept`` itself (its ranking then has nothing to redo)
        return kept if same else tuple(raw)

    def _raw_scores(
        self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo,
    ) -> tuple[float, ...] | Status:
        """Each score plugin's raw score, or the ERROR status of the first that failed."""
        raw: list[float] = []
        for name, run, checked in self._score_calls:
            try:
                value = float(run(ctx, req, cluster))
                if checked and not MIN_SCORE <= value <= MAX_SCORE:
                    _check_range(value)
            except Exception as exc:
                return _plugin_error(name, "score", cluster.name, exc)
            raw.append(value)
        return tuple(raw)

    # -- score and select ----------------------------------------------------------------------

    def _prioritize(
        self, ctx: CycleState, req: PlacementRequest, judged: ShapeTable,
        errors: dict[str, Status],
    ) -> tuple[ScoreTable, Mapping[str, Status], int | None]:
        """The score table, every cluster's status and the index of the best cluster.

        Totals are the plain scores first, then the normalized ones. With a ``Ranking`` and
        every normalizer well-behaved they are kept current and the best comes off its
        heap; else the columns
        are normalized here, and a normalizer that raises or leaves a score outside 0..100
        turns clusters into ERRORs.
        """
        ranking = judged.ranking
        if ranking is not None:
            if not ranking.settled:
                judged.own()
            if ranking.refresh(judged.oks, judged.raws, judged.fixed):
                lent, table = judged.lend(self._plugin_names)
                # clusters whose scoring raised this time are not kept in the table
                return table, {**lent, **errors} if errors else lent, ranking.best(judged.oks)
        statuses = dict(judged.statuses)
        statuses.update(errors)
        table, clean = self._score_columns(ctx, req, judged, statuses)
        best = self._select(table, statuses, clean)
        return table, statuses, None if best is None else judged.positions[best]

    def _score_columns(
        self, ctx: CycleState, req: PlacementRequest, judged: ShapeTable,
        statuses: dict[str, Status],
    ) -> tuple[ScoreTable, bool]:
        """Normalize every column over the feasible clusters (the path without a Ranking);
        False when a normalizer turned clusters into ERRORs."""
        names, rows, totals = judged.feasible()
        normalized: dict[int, list[float]] = {}
        clean = True
        for j, (plugin, weight, _) in enumerate(self._scores):
            normalizer = self._normalizers[j]
            if normalizer is None:
                continue
            column, ok = self._normalized(ctx, req, plugin, normalizer, names,
                                          list(map(itemgetter(j), rows)), statuses)
            normalized[j] = column
            clean = clean and ok
            # as ``t + weight * x`` for each, at C speed (``_normalized`` checked the length)
            totals = list(map(add, totals, map(mul, column, repeat(weight))))
        return ScoreTable(self._plugin_names, names, rows, normalized, totals), clean

    @staticmethod
    def _normalized(
        ctx: CycleState, req: PlacementRequest, plugin: str, normalizer: ScoreNormalizer,
        names: list[str], column: list[float], statuses: dict[str, Status],
    ) -> tuple[list[float], bool]:
        out = list(column)
        try:
            normalizer.normalize(ctx, req, names, out)
            if len(out) != len(names):
                raise ValueError(f"normalize returned {len(out)} scores for {len(names)}")
        except Exception as exc:
            for name in names:
                statuses[name] = _plugin_error(plugin, "normalize", name, exc)
            return column, False
        if out and (min(out) < MIN_SCORE or max(out) > MAX_SCORE):
            for name, value in zip(names, out, strict=True):
                try:
                    _check_range(value)
                except ValueError as exc:
                    statuses[name] = _plugin_error(plugin, "normalize", name, exc)
            return out, False
        return out, True

    @staticmethod
    def _select(table: ScoreTable, statuses: dict[str, Status], clean: bool) -> str | None:
        """Highest total; ties go to the first name (clusters come sorted by name)."""
        totals = table.totals
        if clean:
            return table.clusters[totals.index(max(totals))] if totals else None
        best: str | None = None
        best_total = float("-inf")
        for name, total in zip(table.clusters, totals, strict=True):
            if total > best_total and statuses[name].ok:
                best, best_total = name, total
        return best


def _by_column(normalizer: ScoreNormalizer) -> bool:
    """True when the normalizer is also a ``ColumnNormalizer`` (its totals can be kept)."""
    return callable(getattr(normalizer, "summarize", None)) and callable(
        getattr(normalizer, "normalized", None))


def _nearest_fit(
    req: PlacementRequest, clusters: Sequence[ClusterInfo], statuses: Mapping[str, Status],
    frees: list[tuple[int, int]],
) -> str | None:
    """The open, rejected-for-room cluster with most free devices (or cpu) its nodes match.

    ``frees[i]``: (version, free) of ``clusters[i]`` as last counted for this request shape,
    reused while the cluster's version stays (a failed shape is often asked again).
    """
    best: str | None = None
    most = 0
    for i, cluster in enumerate(clusters):
        if (statuses[cluster.name].code is not Code.UNSCHEDULABLE or not cluster.schedulable
                or cluster.name in req.exclude):
            continue
        version, free = frees[i]
        if version != cluster.version:
            free = cluster.free_for(req.selector, req.selector_key, req.requests)
            frees[i] = (cluster.version, free)
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
