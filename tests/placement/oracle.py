"""A brute-force fit check over every node, to test the indexed search against.

Same semantics as ``hub.fleet.find_fit`` (feasibility, and which requirement failed first),
written as plainly as possible: no buckets, no groups, no caches.
"""

from __future__ import annotations

from fuyao.selector import Selector
from fuyao.spec import TaskRequests
from hub.fleet import ClusterInfo, MissKind, NodeState


def device_capacity(node: NodeState, model: str, r: TaskRequests) -> int:
    """Replicas the node's devices of ``model`` can take (ignoring cpu/memory/pods)."""
    total = 0
    for (cls_model, memory), slot in node.classes.items():
        if cls_model != model or memory < r.gpu_memory_mib:
            continue
        if r.gpu_milli >= 1000:
            total += sum(1 for f in slot.frees if f >= 1000) // (r.gpu_milli // 1000)
        else:
            total += sum(f // r.gpu_milli for f in slot.frees)
    return total


def stage_and_capacity(node: NodeState, r: TaskRequests) -> tuple[int, int]:
    """(1 cpu short, 2 memory short, 3 no pod slot, 4 fits) and replicas it takes by cpu/mem."""
    if node.cpu < r.cpu_milli:
        return 1, 0
    if node.mem < r.memory_mib:
        return 2, 0
    if node.pods < 1:
        return 3, 0
    cap = node.pods
    if r.cpu_milli:
        cap = min(cap, node.cpu // r.cpu_milli)
    if r.memory_mib:
        cap = min(cap, node.mem // r.memory_mib)
    return 4, cap


def naive_fit(
    cluster: ClusterInfo, selector: Selector, r: TaskRequests,
) -> tuple[MissKind | None, int]:
    """(None, replicas) if all fit, else (the first unmet requirement, replicas placed)."""
    nodes = cluster.nodes()
    if not any(n.schedulable for n in nodes):
        return MissKind.NO_NODES, 0
    matching = [n for n in nodes if selector.matches(n.labels)]
    if not matching:
        return MissKind.NO_MATCH, 0
    usable = [n for n in matching if n.schedulable]
    models = sorted({m for n in usable for m in n.model_devices}) if r.gpu_milli else [None]
    best: tuple[MissKind, int] = (MissKind.GPU if r.gpu_milli else MissKind.CPU, 0)
    for model in models:
        reached, placed = 0, 0
        for n in usable:
            dev_cap = r.replicas if model is None else device_capacity(n, model, r)
            if dev_cap == 0:
                continue
            stage, cap = stage_and_capacity(n, r)
            reached = max(reached, stage)
            placed += min(cap, dev_cap)
        if placed >= r.replicas:
            return None, r.replicas
        kinds = (MissKind.GPU if model else MissKind.CPU, MissKind.CPU, MissKind.MEMORY,
                 MissKind.PODS, MissKind.GANG)
        best = max(best, (kinds[reached], placed))
    return best
