"""A placement's per-cluster scores as the store keeps them, and as they are read back.

Every placement (and every new reason a task waits) writes its clusters' verdicts to the
task (``TaskRecord.scores``); ``TaskView.scores`` (REST, ``fuyaoctl task describe``, the SDK)
shows them as ``ClusterScore`` rows. They are written compact, the plugin names once:

    [["ClusterWeight", "Headroom", ...],      the score plugins, in the profile's order
     ["gpu-east", 231.5, [100.0, 37.5, ...]], scored: the total, one score per plugin
     ["gpu-west", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."],   rejected
     ["gpu-north"]]                           feasible, but not in the score table

A row's length says what it is. The scores per plugin are those that entered the total
(normalized where the plugin normalizes). Tasks stored before this form hold one
``ClusterScore`` dict per cluster; ``expand`` reads both, so nothing stored is rewritten.

In memory (``ActiveTask.scores``, kept for the task's whole life) the same form is made of
tuples, not lists (``frozen`` turns what the store reads back into it): a tuple of strings
and floats only is untracked by the cyclic collector the first time a collection sees it,
and a tuple of such tuples by the next collection that sees it (the per-plugin scores,
then the rows, then the whole: a young pass, the middle one, a full one), where lists
were walked by every collection for as long as the task lived. At 100 member clusters
those lists were 47 of the 66 containers a placed task kept tracked, and a full collection
with 10,000 placed tasks alive took 0.30x the time without them (``bench/cycle_bench.py``'s
``full_collection_ms``; ``docs/benchmarks.md``, e2e section, "Twenty-sixth pass"). The JSON
is the same either way.

Why compact: at 100 member clusters building the dict rows was about a tenth of the hub's
CPU end to end, and their JSON (plugin names repeated in each of 20 rows) the bulk of a
placement's write; the compact rows take a fraction of both (``docs/benchmarks.md``, e2e
section, "Sixteenth pass").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

from hub.placement.result import PlacementResult

SCORE_RECORDS = 20   # per task: every cluster up to this many, else the best that fit


Rows = tuple[Any, ...]   # the stored form, in memory: a tuple of tuples (see above)


def score_records(result: PlacementResult, limit: int = SCORE_RECORDS) -> Rows:
    """The verdicts as stored (the compact form above), straight from the score table.

    With more than ``limit`` clusters only ``limit`` are kept: the feasible ones by total
    score, best first (ties in the statuses' order), then rejected ones (their reasons are
    in ``reasons`` too), so what a placement stores does not grow with the fleet. Only the
    kept rows are read from the table.
    """
    return _records(result, limit)[0]


def placed_scores(result: PlacementResult,
                  limit: int = SCORE_RECORDS) -> tuple[Rows, float | None]:
    """``score_records`` and the chosen cluster's total score (None if it is not in the
    table), the table read once: what a placement stores and its message shows."""
    return _records(result, limit)


def _records(result: PlacementResult, limit: int) -> tuple[Rows, float | None]:
    """The stored rows and the chosen cluster's total, read off the table's aligned lists
    (``ScoreTable.aligned_rows``: every cluster, a mask of those in the table) without
    picking the whole table out: at 100 clusters only the 20 kept rows are built, each
    column taken for them at once (``_scored``)."""
    table, statuses = result.table, result.statuses
    names, oks, raws, normalized, totals = table.aligned_rows()
    swaps = list(normalized.items())
    chosen = result.cluster
    best: float | None = None
    if chosen is not None:
        try:
            at = names.index(chosen)
        except ValueError:
            pass
        else:
            if oks[at]:
                best = totals[at]
    out: list[Rows] = [tuple(table.plugins)]
    verdicts = statuses.items()
    if len(verdicts) <= limit:
        row = dict(zip(names, range(len(names)), strict=True))
        for name, status in verdicts:
            i = row.get(name)
            if not status.ok:
                out.append((name, status.reason))
            elif i is None or not oks[i]:
                out.append((name,))
            else:
                out += _scored([i], names, raws, swaps, totals)
        return tuple(out), best
    # Best total first, ties in the table's order (the statuses' order: both by name);
    # a row of the table whose status is not OK (its normalizer failed) is passed over.
    status_of: Mapping[str, Any] = getattr(verdicts, "mapping", None) or dict(verdicts)
    kept: list[int] = []
    for i in sorted(compress(range(len(names)), oks), key=totals.__getitem__, reverse=True):
        if status_of[names[i]].ok:
            kept.append(i)
            if len(kept) == limit:
                break
    if kept:
        out += _scored(kept, names, raws, swaps, totals)
    if len(kept) < limit:
        out += [(name, status.reason) for name, status in verdicts if not status.ok
                ][:limit - len(kept)]
    return tuple(out), best


def _scored(picked: list[int], names: Sequence[str], raws: Sequence[Sequence[float]],
            swaps: list[tuple[int, Sequence[float]]],
            totals: Sequence[float]) -> list[Rows]:
    """``(name, total, (score per plugin))`` for the rows ``picked``, in that order: the
    raw scores with the normalized columns in their place. Each list is read through one
    ``itemgetter`` and the rows put together by ``zip`` and ``map`` (no Python step a row
    or a score)."""
    if len(picked) > 1:
        get: Callable[[Sequence[Any]], tuple[Any, ...]] = itemgetter(*picked)
    else:   # itemgetter of one index gives the item, not a 1-tuple
        only = picked[0]

        def get(seq: Sequence[Any]) -> tuple[Any, ...]:
            return (seq[only],)
    rows: tuple[Sequence[float], ...] = get(raws)
    if swaps:
        columns = list(zip(*rows, strict=True))
        for j, column in swaps:
            columns[j] = get(column)
        rows = tuple(zip(*columns, strict=True))
    return list(zip(get(names), get(totals), map(tuple, rows), strict=True))


def frozen(stored: Sequence[Any]) -> Rows:
    """Stored scores as read back from the store (lists), in the in-memory form: the compact
    form's rows as tuples; the earlier form's dicts are kept as they are."""
    if not stored or isinstance(stored[0], dict):
        return tuple(stored)
    return tuple(tuple(tuple(part) if isinstance(part, list) else part for part in row)
                 for row in stored)


def expand(stored: Sequence[Any]) -> list[dict[str, Any]]:
    """Stored scores, either form, as ``ClusterScore`` dicts (its JSON shape), in order."""
    if not stored or isinstance(stored[0], dict):
        return [dict(s) for s in stored]     # written before the compact form
    plugins = stored[0]
    out: list[dict[str, Any]] = []
    for entry in stored[1:]:
        name = entry[0]
        if len(entry) == 3:
            out.append({"cluster": name, "feasible": True, "score": entry[1], "reason": None,
                        "plugin_scores": dict(zip(plugins, entry[2], strict=True))})
        else:
            rejected = len(entry) == 2
            out.append({"cluster": name, "feasible": not rejected, "score": None,
                        "reason": entry[1] if rejected else None, "plugin_scores": {}})
    return out
