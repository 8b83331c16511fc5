"""Presentation of the capacity-planning answers: ``fuyaoctl.render.Renderer`` extended.

Called only by ``fuyaoctl.commands.capacity`` (and ``cluster list`` for the N-1 warning).
JSON and YAML print the ``fuyao.capacity`` models exactly; tables follow ``render``'s rules
(plain columns, literal cells). History draws one sparkline per cluster and model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from rich.text import Text

from fuyao.capacity import CapacityPoint, CapacityReport, FitAnswer, NMinusOne, ReportRow
from fuyaoctl.render import Renderer, _cells, _num, _table

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 48


def sparkline(values: Sequence[float], top: float | None = None) -> str:
    """Values as block characters, scaled to ``top`` (default: their maximum)."""
    if not values:
        return ""
    if len(values) > SPARK_WIDTH:      # average into SPARK_WIDTH columns
        step = len(values) / SPARK_WIDTH
        values = [_mean(values[int(i * step):max(int(i * step) + 1, int((i + 1) * step))])
                  for i in range(SPARK_WIDTH)]
    high = top if top is not None and top > 0 else max(values)
    if high <= 0:
        return SPARKS[0] * len(values)
    last = len(SPARKS) - 1
    return "".join(SPARKS[min(last, max(0, round(v / high * last)))] for v in values)


def n1_warning(verdict: NMinusOne) -> str | None:
    """The line under ``cluster list`` when the fleet is not N-1 safe, else None."""
    if verdict.safe:
        return None
    unsafe = [name for name, loss in verdict.clusters.items() if not loss.safe]
    return (f"WARNING: the fleet is not N-1 safe: losing {', '.join(unsafe)} would strand "
            f"tasks (see: fuyaoctl capacity n-1)")


class CapacityRenderer(Renderer):
    """``capacity`` report, ``capacity fit``, ``capacity n-1``, ``capacity history``."""

    def capacity_report(self, report: CapacityReport) -> None:
        """``capacity [--by ...]``: rows, fleet totals per model, fragmentation, N-1."""
        if self._dumped(report):
            return
        if not report.rows and not report.fleet:
            self._print("No capacity reported yet (no cluster has an agent connected).")
            return
        by = "FLEET" if report.by == "model" else report.by.upper()
        columns = [by, "MODEL", "NODES", "DEV", "ALLOC", "RSVD", "FREE", "UNSCHED", "FRAG",
                   "QUEUED", "CPU-FREE", "MEM-FREE", "GPU-MEM"]
        if report.by == "cluster":
            columns.append("N-1")
        table = _table(*columns)
        for row in report.rows:
            cells = [row.group, row.model, *_row_numbers(row)]
            if report.by == "cluster":
                cells.append("-" if row.n1_safe is None else "safe" if row.n1_safe else "NO")
            table.add_row(*_cells(*cells))
        fleet = _table("FLEET", "MODEL", "NODES", "DEV", "ALLOC", "RSVD", "FREE", "UNSCHED",
                       "FRAG", "QUEUED", "CPU-FREE", "MEM-FREE", "GPU-MEM")
        for row in report.fleet:
            fleet.add_row(*_cells("total", row.model, *_row_numbers(row)))
        shapes = ", ".join(f"{s.gpu}x{s.gpu_model or 'any'} ({s.weight:g})"
                           for s in report.shapes)
        verdict = "safe" if report.n1_safe else "NOT safe (fuyaoctl capacity n-1)"
        tables = (table,) if report.by == "model" else (table, "", fleet)
        self._print(*tables, "",
                    f"FRAG: free devices no common task shape can use (FGD), shapes from "
                    f"{report.shapes_from}: {shapes}",
                    "QUEUED: devices queued tasks could use here; RSVD is the failover "
                    "headroom; FREE = total - allocated - reserved; UNSCHED: idle on cordoned "
                    "or NotReady nodes, never free. GPU-MEM: device memory in GiB, "
                    "total/allocated/free (memory-shared cards by their share in use).",
                    f"N-1: {verdict}")

    def capacity_fit(self, answer: FitAnswer) -> None:
        """``capacity fit``: per cluster and total, and what limits each."""
        if self._dumped(answer):
            return
        table = _table("CLUSTER", "FIT", "LIMITED BY")
        for name, count in sorted(answer.clusters.items()):
            table.add_row(*_cells(name, count, answer.limited_by.get(name, "")))
        extra = [f"{k}: {v}" for k, v in answer.limited_by.items() if k not in answer.clusters]
        self._print(table, f"Total: {answer.total} more fit now", *extra)

    def capacity_n1(self, verdict: NMinusOne) -> None:
        """``capacity n-1``: per lost cluster, where its tasks would go and what is short."""
        if self._dumped(verdict):
            return
        table = _table("IF LOST", "SAFE", "TASKS", "MOVED TO", "SHORT", "UNPLACED",
                       "HEADROOM NEEDED", "RECOMMENDED")
        for name, loss in verdict.clusters.items():
            table.add_row(*_cells(
                name, "yes" if loss.safe else "NO", loss.tasks,
                ", ".join(f"{c}={n}" for c, n in loss.moved.items()),
                ", ".join(f"{k}={v:g}" for k, v in loss.short.items()),
                ", ".join(loss.unplaced[:5]) + (" ..." if len(loss.unplaced) > 5 else ""),
                f"{loss.headroom_needed:.0%}",
                f"{verdict.headroom_recommended.get(name, 0.0):.0%}"))
        self._print(table, f"N-1: {'safe' if verdict.safe else 'NOT safe'}. "
                           f"Rule: {verdict.rule}.",
                    "HEADROOM NEEDED: share of the other clusters' capacity its tasks take; "
                    "RECOMMENDED: headroom for this cluster that covers losing any other.")

    def capacity_history(self, points: Sequence[CapacityPoint]) -> None:
        """``capacity history``: a sparkline per cluster and model (allocated devices)."""
        if self._dumped(list(points)):
            return
        if not points:
            self._print("No capacity samples in that window yet.")
            return
        series: dict[tuple[str, str], list[CapacityPoint]] = defaultdict(list)
        for p in points:
            series[(p.cluster, p.model)].append(p)
        table = _table("CLUSTER", "MODEL", "ALLOCATED", "NOW", "FREE", "FRAG", "QUEUED",
                       "SAMPLES")
        for (cluster, model), pts in sorted(series.items()):
            last = pts[-1]
            alloc = [p.devices_allocated if p.devices_total else p.cpu_allocated for p in pts]
            top = last.devices_total or last.cpu_total
            table.add_row(Text(cluster), Text(model), Text(sparkline(alloc, top), style="cyan"),
                          *_cells(f"{_num(alloc[-1])}/{_num(top)}", _num(last.devices_free),
                                  _num(last.devices_fragmented), _num(last.queued_devices),
                                  len(pts)))
        first, last_at = points[0].at, points[-1].at
        self._print(table, f"{first:%Y-%m-%d %H:%M} .. {last_at:%H:%M} UTC; ALLOCATED: devices "
                           f"(cores for CPU-only rows), scaled to the total.")


def _row_numbers(row: ReportRow) -> list[str]:
    return [str(row.nodes), *map(_num, (
        row.devices_total, row.devices_allocated, row.devices_reserved, row.devices_free,
        row.devices_unschedulable, row.devices_fragmented, row.queued_devices, row.cpu_free,
        row.memory_free_gib)), _gpu_memory(row)]


def _gpu_memory(row: ReportRow) -> str:
    """``total/allocated/free`` device memory in GiB, or ``-`` for rows without devices."""
    if not row.gpu_memory_total_gib:
        return "-"
    return "/".join(_num(v) for v in (row.gpu_memory_total_gib, row.gpu_memory_allocated_gib,
                                      row.gpu_memory_free_gib))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
