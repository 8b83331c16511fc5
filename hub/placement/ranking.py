"""Score totals kept between decisions: one request shape's ranking, updated on change.

Without it the scheduler (``hub.placement.scheduler``) normalizes every score column over
all feasible clusters and sums every total on every decision - work that grows with the
number of clusters although only the few clusters that changed since the shape's last
decision have new raw scores. When every normalizer of the profile is a
``ColumnNormalizer`` (the default profile's are), a ``ShapeTable`` carries a ``Ranking``:

- per normalized column, how many feasible clusters have each distinct raw value, so the
  column's summary (ClusterWeight: the largest weight) is known without a scan;
- every cluster's normalized scores and weighted total, aligned with the table.

The scheduler tells it which clusters it re-judged (``leave``, ``join``, ``update``); then
``refresh`` recomputes the totals of those only - or of all feasible clusters when a
column's summary moved (the heaviest cluster left, a lower model became feasible). The
arithmetic is the same as the full path's, in the same order, so totals are bit-identical.

``best`` answers the selection without a scan: a heap of (total, index) entries
(``hub.placement.bestfirst``), one pushed per recomputed total, stale ones dropped when they
reach the top (their cluster left or its total moved); rebuilt when a summary moved or stale
entries pile up. Ties go to the lowest index, i.e. the first cluster name, as the full
path's ``totals.index(max(totals))``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import compress
from typing import Final

from hub.placement.bestfirst import BestFirst
from hub.placement.framework import MAX_SCORE, MIN_SCORE, ColumnNormalizer

Column = tuple[int, float, ColumnNormalizer]   # score index, weight, its normalizer
_UNSET: Final = object()


class Ranking:
    """Normalized scores and totals of one shape table's clusters, kept current."""

    __slots__ = ("_aligned", "_columns", "_counts", "_dirty", "_heap", "_moved", "_norms",
                 "_renorm", "_summaries", "_tallies", "save", "totals")

    def __init__(self, count: int, columns: Sequence[Column]) -> None:
        self._columns = tuple(columns)
        self._counts: list[dict[float, int]] = [{} for _ in self._columns]
        # (score index, normalizer, counts) per column: the per-cluster loops walk this
        # tuple (a compiled loop) rather than zip the columns with their counts (a call)
        self._tallies = tuple((j, normalizer, counts) for (j, _, normalizer), counts
                              in zip(self._columns, self._counts, strict=True))
        self._summaries: list[Hashable] = [_UNSET] * len(self._columns)
        self._norms = [[0.0] * count for _ in self._columns]
        # per normalized score index, its column: the same lists, changed in place
        self._aligned = {column[0]: norms for column, norms in zip(
            self._columns, self._norms, strict=True)}
        self._dirty: set[int] = set()
        self._renorm: set[int] = set()   # dirty ones whose normalized columns' raws moved
        self._moved = True   # the counts changed since the summaries were taken
        self._heap = BestFirst()
        self.totals = [0.0] * count   # valid for the clusters the table marks ok
        self.save: Callable[[int], None] | None = None   # called before a row changes

    @property
    def settled(self) -> bool:
        """True when ``refresh`` has nothing to recompute (so it changes nothing)."""
        return not self._dirty and _UNSET not in self._summaries

    def row(self, index: int) -> tuple[float, tuple[float, ...]]:
        """A cluster's total and normalized scores (for a ``Journal``)."""
        return self.totals[index], tuple(norms[index] for norms in self._norms)

    def leave(self, index: int, raw: tuple[float, ...]) -> None:
        """Feasible cluster ``index``, with these raw scores, is no longer feasible."""
        self._dirty.add(index)
        self._moved = True
        for j, _, counts in self._tallies:
            value = raw[j]
            left = counts[value] - 1
            if left:
                counts[value] = left
            else:
                del counts[value]

    def join(self, index: int, raw: tuple[float, ...]) -> None:
        """Cluster ``index`` was judged feasible with these raw scores."""
        for j, _, counts in self._tallies:
            value = raw[j]
            counts[value] = counts.get(value, 0) + 1
        self._dirty.add(index)
        self._renorm.add(index)
        self._moved = True

    def update(self, index: int, old: tuple[float, ...], new: tuple[float, ...]) -> None:
        """Feasible cluster ``index`` stays feasible, its raw scores ``old`` now ``new``
        (``leave`` then ``join``, touching only the normalized columns that moved).
        ``new is old``: nothing to do - its total reads only its raw scores and the
        summaries, and a summary that moves recomputes every total anyway."""
        if old is new:
            return
        self._dirty.add(index)
        for j, _, counts in self._tallies:
            was, value = old[j], new[j]
            if was == value:
                continue
            left = counts[was] - 1
            if left:
                counts[was] = left
            else:
                del counts[was]
            counts[value] = counts.get(value, 0) + 1
            self._moved = True
            self._renorm.add(index)

    def refresh(
        self, oks: Sequence[bool], raws: Sequence[tuple[float, ...]], fixed: Sequence[float],
    ) -> bool:
        """Bring totals up to date; False (and start over next time) if a normalizer raised
        or left a score outside 0..100 - the caller then takes the full path, which names
        the clusters in ERROR exactly as it always does."""
        try:
            moved = False
            if self._moved:   # else every column's distinct values are as they were
                for k, (_, normalizer, counts) in enumerate(self._tallies):
                    summary = normalizer.summarize(counts.keys())
                    if summary != self._summaries[k]:
                        self._summaries[k] = summary
                        moved = True
                self._moved = False
            due = (list(compress(range(len(oks)), oks)) if moved
                   else [i for i in self._dirty if oks[i]])
            self._compute(due, raws, fixed, None if moved else self._renorm)
        except Exception:
            self._summaries = [_UNSET] * len(self._columns)
            self._moved = True
            return False
        self._dirty.clear()
        self._renorm.clear()
        totals, heap = self.totals, self._heap
        if moved or len(heap) > 2 * len(oks) + 64:
            heap.reset(totals, compress(range(len(oks)), oks))
        else:
            for i in due:
                heap.push(totals[i], i)
        return True

    def best(self, oks: Sequence[bool]) -> int | None:
        """The index of the highest total among ``oks`` (the lowest index of equals), after
        ``refresh``; None when no cluster is feasible."""
        return self._heap.first(oks, self.totals)

    def aligned(self) -> Mapping[int, list[float]]:
        """Per normalized score index, every cluster's score (valid where the table is ok):
        one mapping for the ranking's life, its columns changed in place - as the lists a
        decision reads of the table are (a ``Journal`` keeps the rows they had)."""
        return self._aligned

    def _compute(
        self, indices: Sequence[int], raws: Sequence[tuple[float, ...]],
        fixed: Sequence[float], renorm: set[int] | None = None,
    ) -> None:
        """``fixed + weight x normalized`` per column in profile order, as the full path;
        with ``renorm``, indices outside it keep their normalized scores (their raws and
        the summaries did not move) and only their totals are summed again."""
        summaries, all_norms = self._summaries, self._norms   # one per column, as _columns
        columns = [(j, weight, normalizer.normalized, summaries[k], all_norms[k])
                   for k, (j, weight, normalizer) in enumerate(self._columns)]
        totals, save = self.totals, self.save
        for i in indices:
            if save is not None:
                save(i)
            total = fixed[i]
            if renorm is not None and i not in renorm:
                for _, weight, _, _, norms in columns:
                    total = total + weight * norms[i]
                totals[i] = total
                continue
            raw = raws[i]
            for j, weight, normalized, summary, norms in columns:
                value = normalized(summary, raw[j])
                if not MIN_SCORE <= value <= MAX_SCORE:
                    raise ValueError(f"normalized score {value!r} outside 0..100")
                norms[i] = value
                total = total + weight * value
            totals[i] = total
