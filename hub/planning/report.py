"""The rows of ``fuyaoctl capacity``: per cluster, site, model or queue, with fragmentation.

``cluster_rows`` turns the fleet view's capacity rows (``FleetView.capacity``) into report
rows and adds, per cluster and model, the fragmented devices (``hub.planning.fragmentation``)
and the queued demand (``queued_demand``); ``regroup`` sums them by site label or over the
fleet (per model); ``queue_rows`` shows what each queue holds and waits for. ``Planner``
(``hub.planning.planner``) calls them; numbers round to three digits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from fuyao.capacity import ReportRow
from fuyao.labels import SITE
from fuyao.selector import Selector
from fuyao.spec import CapacityRow, TaskSpec
from hub.fleet import NO_MODEL, WHOLE, ClusterInfo

FLEET = "fleet"
NO_SITE = "-"
_DIGITS = 3
_SUMMED = ("nodes", "devices_total", "devices_allocated", "devices_reserved", "devices_free",
           "devices_unschedulable", "devices_fragmented", "queued_tasks", "queued_devices",
           "cpu_total", "cpu_free", "memory_total_gib", "memory_free_gib",
           "gpu_memory_total_gib", "gpu_memory_allocated_gib", "gpu_memory_free_gib")

Demand = dict[tuple[str, str], tuple[int, float]]   # (cluster, model) -> (tasks, devices)


def cluster_rows(
    capacity: Iterable[CapacityRow], fragmented: Mapping[str, Mapping[str, float]],
    queued: Demand,
) -> list[ReportRow]:
    """One row per cluster and model, with fragmentation and queued demand."""
    rows = []
    for c in capacity:
        tasks, devices = queued.get((c.cluster, c.model), (0, 0.0))
        rows.append(ReportRow(
            group=c.cluster, model=c.model, nodes=c.nodes, devices_total=c.devices_total,
            devices_allocated=c.devices_allocated, devices_reserved=c.devices_reserved,
            devices_free=c.devices_free, devices_unschedulable=c.devices_unschedulable,
            devices_fragmented=round(fragmented.get(c.cluster, {}).get(c.model, 0.0), _DIGITS),
            queued_tasks=tasks, queued_devices=round(devices, _DIGITS),
            cpu_total=c.cpu_total, cpu_free=c.cpu_free, memory_total_gib=c.memory_total_gib,
            memory_free_gib=c.memory_free_gib, gpu_memory_total_gib=c.gpu_memory_total_gib,
            gpu_memory_allocated_gib=c.gpu_memory_allocated_gib,
            gpu_memory_free_gib=c.gpu_memory_free_gib,
        ))
    return rows


def regroup(rows: Iterable[ReportRow], group_of: Callable[[ReportRow], str],
            *, distinct_queued: Demand | None = None) -> list[ReportRow]:
    """Sum rows into (group, model) rows, sorted; ``distinct_queued`` replaces the summed
    queued demand (a task that could go to two clusters is queued once)."""
    sums: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        acc = sums[(group_of(row), row.model)]
        for name in _SUMMED:
            acc[name] += getattr(row, name)
    out = []
    for (group, model), acc in sorted(sums.items()):
        values: dict[str, float] = {name: round(v, _DIGITS) for name, v in acc.items()}
        if distinct_queued is not None:
            tasks, devices = distinct_queued.get((group, model), (0, 0.0))
            values["queued_tasks"], values["queued_devices"] = tasks, round(devices, _DIGITS)
        values["nodes"] = int(values["nodes"])
        values["queued_tasks"] = int(values["queued_tasks"])
        out.append(ReportRow.model_validate({"group": group, "model": model, **values}))
    return out


def site_of(clusters: Mapping[str, ClusterInfo]) -> Callable[[ReportRow], str]:
    """A ``regroup`` key: the cluster's ``fuyao.io/site`` label."""
    def key(row: ReportRow) -> str:
        cluster = clusters.get(row.group)
        return NO_SITE if cluster is None else cluster.labels.get(SITE, NO_SITE)
    return key


def queued_demand(
    clusters: Sequence[ClusterInfo], queued: Iterable[tuple[TaskSpec, Selector, str]],
) -> tuple[Demand, Demand]:
    """Queued demand per (cluster, model) and per (``fleet``, model).

    ``queued`` holds (spec, parsed selector, selector text) of each queued task. A task
    counts towards every model (and cluster) whose nodes its selector matches - "tasks that
    could run here" - and once per model for the fleet; CPU-only tasks count under ``none``
    in clusters with a matching node.
    """
    per_cluster: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    fleet: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for spec, selector, key in queued:
        r = spec.requests()
        devices = r.gpu_milli * r.replicas / WHOLE
        models: set[str] = set()
        for cluster in clusters:
            found = cluster.matching(selector, key)
            here = (set(found.models(r.gpu_memory_mib)) if r.gpu_milli
                    else ({NO_MODEL} if cluster.has_match(selector, key)
                          else set()))
            for model in here:
                entry = per_cluster[(cluster.name, model)]
                entry[0] += 1
                entry[1] += devices
            models |= here
        for model in models:
            entry = fleet[(FLEET, model)]
            entry[0] += 1
            entry[1] += devices
    return ({k: (int(v[0]), v[1]) for k, v in per_cluster.items()},
            {k: (int(v[0]), v[1]) for k, v in fleet.items()})


def queue_rows(
    active: Iterable[tuple[str, str, str | None, TaskSpec]],
) -> list[ReportRow]:
    """Per queue and model: devices and cpu held by placed/running tasks, and what waits.

    ``active`` holds (queue, state, model it runs on or None, spec) per active task.
    """
    sums: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for queue, state, model, spec in active:
        r = spec.requests()
        acc = sums[(queue, model or NO_MODEL)]
        devices = r.gpu_milli * r.replicas / WHOLE
        if state == "Queued":
            acc["queued_tasks"] += 1
            acc["queued_devices"] += devices
        else:
            acc["devices_allocated"] += devices
            acc["cpu_total"] += r.cpu_milli * r.replicas / 1000
            acc["memory_total_gib"] += r.memory_mib * r.replicas / 1024
    return [ReportRow(group=queue, model=model, queued_tasks=int(acc["queued_tasks"]),
                      queued_devices=round(acc["queued_devices"], _DIGITS),
                      devices_allocated=round(acc["devices_allocated"], _DIGITS),
                      cpu_total=round(acc["cpu_total"], _DIGITS),
                      memory_total_gib=round(acc["memory_total_gib"], _DIGITS))
            for (queue, model), acc in sorted(sums.items())]
