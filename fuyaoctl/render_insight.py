"""Presentation of ``task submit --dry-run`` and ``task explain`` (JSON, YAML or text).

Called by ``fuyaoctl.commands.explain`` and ``cli.task_submit``; built on ``render.Renderer``
so ``-o json`` prints exactly the hub's ``DryRunView`` / ``ExplainView``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from fuyao.insight import ClusterScores, DryRunView, ExplainView, NearestFit
from fuyaoctl.render import Renderer, _cells, _fields, _indent, _num, _reasons, _table


class InsightRenderer(Renderer):
    """Adds the dry-run and explain answers to the plain renderer."""

    def dry_run(self, view: DryRunView) -> None:
        """``task submit --dry-run``: where it would go, or why nowhere."""
        if self._dumped(view):
            return
        if view.cluster is not None:
            head = (f"Task {view.name} would go to {view.cluster} "
                    f"(nodes {', '.join(view.nodes)}{f'; {view.model}' if view.model else ''}).")
        else:
            head = f"Task {view.name} fits nowhere now: {view.error}"
        parts: list[object] = [head]
        if view.held:
            parts.append(f"It would wait: {view.held}.")
        parts += _body(view.scores, view.reasons, view.nearest_fit, view.alternatives)
        parts.append("Nothing was stored.")
        self._print(*parts)

    def explain(self, view: ExplainView) -> None:
        """``task explain``: the histogram, queue, dependencies, scores and nearest fit."""
        if self._dumped(view):
            return
        rows = {"Task": view.task, "State": view.state, "Message": view.message,
                "Cluster": view.cluster, "Why": view.summary, "Held": view.held,
                **_queue_rows(view.queue),
                "After": ", ".join(f"{k} ({v})" for k, v in view.dependencies.items())}
        parts: list[object] = [_fields(rows)]
        if view.histogram:
            parts += ["Histogram:", _indent(_counts(view.histogram))]
        parts += _body(view.scores, view.reasons, view.nearest_fit, view.alternatives)
        self._print(*parts)


def _queue_rows(queue: Mapping[str, Any]) -> dict[str, object]:
    """The queue part of ``task explain``: place, quotas against use, what holds it."""
    position = queue.get("position")
    used = queue.get("usage") or {}
    quotas = queue.get("quotas") or {}
    borrow = queue.get("borrow") or {}
    quota = "; ".join(
        f"{r} {q}{f' +{borrow[r]} borrow' if r in borrow else ''} (in use {used.get(r, '0')})"
        for r, q in quotas.items())
    kept = queue.get("reserved_cluster")
    rows = {
        "Queue": f"{queue.get('queue', '-')}{f' #{position}' if position else ''}",
        "Quota": quota or None,
        "Held by": queue.get("held_by"),
        "Kept for it": f"cluster {kept}" if kept else None,
        "Preempting": ", ".join(queue.get("preempting") or []) or None,
    }
    return {k: v for k, v in rows.items() if v is not None or k in ("Queue", "Held by")}


def _body(scores: Mapping[str, ClusterScores], reasons: Mapping[str, str],
          nearest: NearestFit | None, others: list[NearestFit]) -> list[object]:
    parts: list[object] = []
    if scores:
        parts += ["Clusters that fit:", _indent(_score_table(scores))]
    if reasons:
        parts += ["Rejected:", _indent(_reasons(reasons))]
    if nearest is not None:
        parts.append(f"Nearest fit: {nearest.description} -> {nearest.cluster}")
        rest = [alt for alt in others if alt is not nearest and alt != nearest]
        if rest:
            parts.append("Also: " + "; ".join(f"{a.description} -> {a.cluster}" for a in rest))
    return parts


def _score_table(scores: Mapping[str, ClusterScores]) -> Table:
    table = _table("CLUSTER", "SCORE", "PLUGINS")
    for cluster, row in scores.items():
        plugins = " ".join(f"{name}={_num(value)}" for name, value in row.plugins.items())
        table.add_row(*_cells(cluster, _num(row.total), plugins))
    return table


def _counts(histogram: Mapping[str, int]) -> Table:
    table = _table("CLUSTERS", "REASON")
    for reason, count in histogram.items():
        table.add_row(*_cells(count, reason))
    return table
