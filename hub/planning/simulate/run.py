"""One simulation from inputs to the JSON report ``fuyaoctl simulate -o json`` prints.

Called by ``fuyaoctl simulate`` and ``bench/trace_quality.py`` (one implementation: the bench
reads these reports). ``simulate`` orders the workload (FGD's seeded arrival order, or trace
time with ``durations``), builds the federation for a policy, replays, and reports.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fuyao.errors import InvalidInput
from fuyao.fragmentation import (
    DEFAULT_MIX,
    STARVED_WEIGHT,
    ShapeMix,
    named_models,
    pinned_shares,
)
from hub.planning.simulate.engine import Federation, Outcome, Progress, replay
from hub.planning.simulate.fleet import SimCluster
from hub.planning.simulate.policies import SimPolicy
from hub.planning.simulate.workload import FGD_TUNE, SimTask, arrival_order, timed_order

MAX_ARRIVAL = 10.0


def workload_mix(tasks: Sequence[SimTask], starved_weight: float = STARVED_WEIGHT) -> ShapeMix:
    """The expected task shapes: the workload's own GPU tasks (or ``DEFAULT_MIX``'s shapes);
    ``starved_weight`` 0 gives the FGD paper's gradient (``fuyao.fragmentation``); the
    models that model-constrained tasks name are spared the starved term, and the share of
    GPU demand pinned to each is held for those tasks (``ShapeMix.scarcity``)."""
    spared = constrained_models(tasks)
    pinned = pinned_shares((t.requests, named_models(t.selector)) for t in tasks)
    if any(t.requests.gpu_milli for t in tasks):
        return ShapeMix.from_requests((t.requests for t in tasks), starved_weight, spared,
                                      pinned)
    return ShapeMix(DEFAULT_MIX.shapes, starved_weight, spared, pinned)


def constrained_models(tasks: Sequence[SimTask]) -> frozenset[str]:
    """Every GPU model some task's selector names (``fuyao.fragmentation.named_models``)."""
    return frozenset().union(*(named_models(t.selector) for t in tasks))


def ordered(tasks: Sequence[SimTask], seed: int, capacity_milli: int, arrival: float,
            durations: bool, trace: bool = True) -> list[SimTask]:
    """The arrival order for a run (``arrival`` is a fraction of GPU capacity): a trace in
    FGD's seeded, tuned order (or by its times with ``durations``); task files and queues
    as given, once each."""
    if durations:
        return timed_order(tasks, seed)
    if not trace:
        return list(tasks)
    return arrival_order(tasks, seed, capacity_milli, tune=max(FGD_TUNE, arrival + 0.01))


def simulate(clusters: Sequence[SimCluster], tasks: Sequence[SimTask], policy: SimPolicy, *,
             seed: int = 42, arrival: float = 1.0, durations: bool = False,
             progress: Progress | None = None, order: Sequence[SimTask] | None = None,
             mix: ShapeMix | None = None, trace: bool = True) -> dict[str, Any]:
    """Replay ``tasks`` on ``clusters`` under ``policy``; the report (see docs/simulate.md).

    ``order`` and ``mix`` let a caller running many policies on one workload compute them
    once; by default they come from ``tasks`` and ``seed`` (``trace``: see ``ordered``).
    """
    if not 0 < arrival <= MAX_ARRIVAL:
        raise InvalidInput(f"--arrival: {arrival:g} must be above 0 and at most {MAX_ARRIVAL:g}")
    if not tasks:
        raise InvalidInput("the workload has no tasks")
    started = time.monotonic()
    mix = mix or workload_mix(tasks)
    fed = Federation(clusters, policy, mix, seed)
    if order is None:
        order = ordered(tasks, seed, fed.total_gpu_milli, arrival, durations, trace)
    if durations and not any(t.duration is not None for t in order):
        raise InvalidInput("--durations: no task has a duration (a pod list needs its "
                           "creation_time and deletion_time columns; a task file, duration:)")
    result = replay(fed, order, 100.0 * arrival, durations=durations, progress=progress)
    point = round(100.0 * arrival)
    at = result.at(point)
    stats = fed.cluster_stats()
    free = sum(float(c["gpu_free"]) for c in stats.values())
    fragmented = sum(float(c["fragmented_gpus"]) for c in stats.values())
    placed = result.outcomes[Outcome.BOUND.value]
    return {
        "policy": policy.name,
        "member_policy": policy.member.value,
        "starved_weight": mix.starved_weight,
        "profile": policy.profile.to_config(),
        "seed": seed,
        "arrival_pct": round(100.0 * arrival, 2),
        "durations": durations,
        "clusters_count": len(clusters),
        "nodes": sum(len(c.nodes) for c in clusters),
        "gpus_total": result.total_gpu_milli // 1000,
        "gpu_allocation_pct": round(at if at is not None else result.allocated_pct, 2),
        "gpu_allocated_final_pct": round(result.allocated_pct, 2),
        "arrived_gpu_pct": round(result.arrived_pct, 2),
        "tasks_arrived": result.arrived,
        "tasks_placed": placed,
        "tasks_unplaced": result.arrived - placed,
        "tasks_departed": result.departed,
        "unplaced": {k: v for k, v in result.outcomes.items() if k != Outcome.BOUND.value},
        "fragmentation_pct": round(100.0 * fragmented / free, 2) if free else 0.0,
        **result.counters,
        "clusters": stats,
        "curve": {str(p): round(v, 3) for p, v in sorted(result.curve.items())},
        "simulated_seconds": round(result.clock, 1) if durations else None,
        "seconds": round(time.monotonic() - started, 2),
    }
