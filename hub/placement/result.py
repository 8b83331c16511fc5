"""What one placement decision returns: the chosen cluster and nodes, every cluster's verdict.

Built by ``Scheduler.schedule``; the placement loop stores ``cluster``/``nodes`` and shows
``reasons``, ``scores`` and ``error.message`` on the task (``TaskView.reasons/scores``,
``fuyaoctl task describe``). The per-cluster tables are built on first access only: most
decisions are read for their cluster and nodes alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress

from fuyao.spec import ClusterScore
from hub.fleet import Fit
from hub.placement.framework import Status


@dataclass(frozen=True, slots=True)
class FitError:
    """No cluster fits: how many clusters gave each reason (Karmada's ``FitError``)."""

    total: int
    histogram: tuple[tuple[str, int], ...]   # (reason, clusters), most frequent first
    nearest_fit: str | None = None

    @classmethod
    def from_reasons(
        cls, total: int, reasons: Iterable[str], nearest_fit: str | None = None,
    ) -> FitError:
        """Count reasons; order by count, most first, then by text."""
        counts = Counter(reasons)
        histogram = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return cls(total, histogram, nearest_fit)

    @property
    def message(self) -> str:
        """``0/5 clusters are available: 3 <reason>, 2 <reason>.``"""
        if not self.histogram:
            return f"0/{self.total} clusters are available: no clusters in the fleet."
        parts = ", ".join(f"{count} {reason}" for reason, count in self.histogram)
        return f"0/{self.total} clusters are available: {parts}."

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    """One cluster's outcome: the filter status, and the scores if it was feasible."""

    cluster: str
    status: Status
    score: float | None = None
    plugin_scores: tuple[tuple[str, float], ...] = ()


class ScoreTable:
    """Scores of the feasible clusters: one column per score plugin, and the weighted totals.

    ``rows`` holds each cluster's raw scores (one per plugin) and ``normalized`` the columns
    a plugin's ``normalize`` rewrote; ``columns`` puts the two together on first access.
    ``aligned`` builds one from lists over every cluster and a feasible mask, picking the
    feasible entries out only when the table is read (most decisions never read it).
    """

    __slots__ = ("__weakref__", "_aligned", "_columns", "_parts", "plugins")

    def __init__(
        self, plugins: tuple[str, ...] = (), clusters: Sequence[str] = (),
        rows: Sequence[Sequence[float]] = (),
        normalized: Mapping[int, Sequence[float]] | None = None, totals: Sequence[float] = (),
    ) -> None:
        self.plugins = plugins
        self._parts: _Parts | None = (clusters, rows, normalized or {}, totals)
        self._aligned: _Aligned | None = None
        self._columns: tuple[Sequence[float], ...] | None = None

    @classmethod
    def aligned(
        cls, plugins: tuple[str, ...], names: Sequence[str], oks: Sequence[bool],
        raws: Sequence[Sequence[float]], normalized: Mapping[int, Sequence[float]],
        totals: Sequence[float], before: Mapping[int, Row] | None = None,
    ) -> ScoreTable:
        """A table over the clusters where ``oks`` is True (every list aligned with names);
        ``before``: rows changed since, as they were (status, ok, raws, total, normalized),
        kept by the caller while it changes the lists in place (``read_now`` copies them);
        None: the lists are the table's own and stay as they are."""
        table = cls.__new__(cls)   # once a decision: not through __init__'s defaults
        table.plugins, table._parts, table._columns = plugins, None, None
        table._aligned = (names, oks, raws, normalized, totals, before)
        return table

    def _read(self) -> _Parts:
        parts = self._parts
        if parts is None:
            names, oks, raws, normalized, totals = self.aligned_rows()
            parts = self._parts = (
                list(compress(names, oks)), list(compress(raws, oks)),
                {j: list(compress(column, oks)) for j, column in normalized.items()},
                list(compress(totals, oks)))
        return parts

    def read_now(self) -> None:
        """Copy the rows as they are now: the lists a lent table was built on are the
        engine's, changed in place by later decisions (the ``before`` journal keeps what
        they were, for as long as this table holds it). Copied, it lets the journal go;
        what it gives is the same as read before. Shallow copies of whole lists: picking
        the feasible entries out (``parts``) waits until something asks for them."""
        aligned = self._aligned
        if aligned is None or aligned[5] is None:   # built from parts, or read already
            return
        names, oks, raws, normalized, totals, before = aligned
        was_ok, was_raw, was_total = list(oks), list(raws), list(totals)
        was_norm = {j: list(column) for j, column in normalized.items()}
        if before:   # the rows as they were when this table was made
            columns = list(was_norm.values())
            for i, (_, ok, raw, total, norms) in before.items():
                was_ok[i], was_raw[i], was_total[i] = ok, raw, total
                for column, value in zip(columns, norms, strict=True):
                    column[i] = value
        self._aligned = (names, was_ok, was_raw, was_norm, was_total, None)

    def aligned_rows(self) -> tuple[Sequence[str], Sequence[bool], Sequence[Sequence[float]],
                                    Mapping[int, Sequence[float]], Sequence[float]]:
        """``(names, oks, raws, normalized, totals)``: lists over every cluster the table
        was built on, ``oks`` True where it is in the table (feasible and scored) - read
        now (``read_now``). A table built from its parts gives them, every ``ok`` True.
        What ``hub.scorerows`` picks its few rows from without building ``parts``."""
        if self._aligned is None:
            clusters, rows, normalized, totals = self._parts or ((), (), {}, ())
            return clusters, [True] * len(clusters), rows, normalized, totals
        self.read_now()
        assert self._aligned is not None
        names, oks, raws, normalized, totals, _ = self._aligned
        return names, oks, raws, normalized, totals

    def parts(self) -> tuple[Sequence[str], Sequence[Sequence[float]],
                             Mapping[int, Sequence[float]], Sequence[float]]:
        """``(clusters, rows, normalized, totals)`` in one call (what the four properties
        give one by one)."""
        return self._read()

    @property
    def clusters(self) -> Sequence[str]:
        """The feasible clusters, in name order."""
        return self._read()[0]

    @property
    def rows(self) -> Sequence[Sequence[float]]:
        """Each feasible cluster's raw scores, one per plugin."""
        return self._read()[1]

    @property
    def normalized(self) -> Mapping[int, Sequence[float]]:
        """Per normalized plugin index, the feasible clusters' normalized scores."""
        return self._read()[2]

    @property
    def totals(self) -> Sequence[float]:
        """Each feasible cluster's weighted total."""
        return self._read()[3]

    @property
    def columns(self) -> tuple[Sequence[float], ...]:
        """Per plugin, the scores of ``clusters`` as they entered the totals."""
        if self._columns is None:
            _, rows, normalized, _ = self._read()
            self._columns = tuple(
                normalized[j] if j in normalized else [row[j] for row in rows]
                for j in range(len(self.plugins))
            )
        return self._columns


_Parts = tuple[Sequence[str], Sequence[Sequence[float]], Mapping[int, Sequence[float]],
               Sequence[float]]
_Aligned = tuple[Sequence[str], Sequence[bool], Sequence[Sequence[float]],
                 Mapping[int, Sequence[float]], Sequence[float], Mapping[int, "Row"] | None]
Row = tuple[Status, bool, tuple[float, ...], float, tuple[float, ...]]


_NO_TABLE = ScoreTable()


@dataclass(frozen=True, init=False)
class PlacementResult:
    """The decision: ``cluster`` and one node per replica, or ``error`` when none fits."""

    cluster: str | None
    nodes: tuple[str, ...]
    error: FitError | None = None
    model: str | None = None
    statuses: Mapping[str, Status] = field(default_factory=dict, repr=False, compare=False)
    table: ScoreTable = field(default=_NO_TABLE, repr=False, compare=False)

    def __init__(
        self, cluster: str | None, nodes: tuple[str, ...], error: FitError | None = None,
        model: str | None = None, statuses: Mapping[str, Status] | None = None,
        table: ScoreTable = _NO_TABLE,
    ) -> None:
        # the frozen dataclass's own __init__, written into the instance's dict at once:
        # its generated one calls object.__setattr__ per field (about 7,000 instructions,
        # 2% of a steady placement decision; this is built once a decision)
        values = self.__dict__
        values["cluster"], values["nodes"], values["error"] = cluster, nodes, error
        values["model"] = model
        values["statuses"] = {} if statuses is None else statuses
        values["table"] = table

    @cached_property
    def reasons(self) -> dict[str, str]:
        """Cluster -> why it was rejected, for the rejected clusters."""
        return {name: s.reason for name, s in self.statuses.items() if not s.ok}

    @cached_property
    def verdicts(self) -> tuple[ClusterVerdict, ...]:
        """Every cluster's status, with total and per-plugin scores when it was feasible."""
        t = self.table
        row = {name: i for i, name in enumerate(t.clusters)}
        out = []
        for name, status in self.statuses.items():
            i = row.get(name)
            if i is None or not status.ok:
                out.append(ClusterVerdict(name, status))
                continue
            parts = tuple((p, col[i]) for p, col in zip(t.plugins, t.columns, strict=True))
            out.append(ClusterVerdict(name, status, t.totals[i], parts))
        return tuple(out)

    @cached_property
    def scores(self) -> tuple[ClusterScore, ...]:
        """Every cluster: feasible or not, total and per-plugin scores, or its reason."""
        return tuple(
            ClusterScore(
                cluster=v.cluster, feasible=v.status.ok, score=v.score,
                reason=None if v.status.ok else v.status.reason,
                plugin_scores=dict(v.plugin_scores),
            )
            for v in self.verdicts
        )

    def read_now(self) -> None:
        """Read the statuses and score table now. Lent by the engine, they read its tables
        through a journal that a later decision's changes are copied into for as long as
        they might be read (``ShapeTable.lend``); read, they let it go, and what they give
        is the same as read later. For a result kept while later decisions are made."""
        self.statuses.items()
        self.table.read_now()

    @property
    def fit(self) -> Fit | None:
        """The nodes and device model to reserve, or None."""
        return None if self.cluster is None else Fit(self.nodes, self.model)
