"""Fragmentation filter and score: the cluster whose best node fragments least (FGD).

The FGD paper's idea at cluster level (``fuyao.fragmentation``): for a one-replica GPU task,
every node of the cluster that fits is judged by how much its fragmentation against the
expected task shapes (a ``ShapeMix``) would grow, and the cluster is as good as its best
node. The filter records that node (and its model) as the cluster's fit in the
``CycleState``, so the reservation, Headroom's check and the model pinned for the member
follow it, and a member running the ``fgd`` node policy - the same function - binds there.
It never rejects: NodeFit does. With a headroom reserve, only nodes of a model the replica
leaves outside its reserve are chosen (the ``Headroom`` filter checks the fit's model and
would otherwise reject the cluster although another model has room); failover and
high-priority tasks may use the reserve, as there. The score's raw value is the growth
(lower is better); ``normalize`` maps the best feasible cluster to 100 and the worst to 0.

A task that names no GPU model also pays the mix's ``scarcity`` for its node's model: the
share of the cluster's free GPU the workload pins to that model is held for the tasks
pinned to it (``fuyao.fragmentation``; nothing is held with the default mix). The hold
is per cluster, so the answer still depends on the cluster alone. The member does not
repeat it: the hub pins the model it chose, and within one model the charge is the same.

Gangs (several replicas) and CPU-only tasks are left to NodeFit's fit and score neutral.
A node's answer is kept while its ``NodeState`` (rebuilt on every change) stays the same.
Ties go to the node with more GPU in use (``fuyao.nodescheduler.gpu_used_after``), then the
name, exactly as the ``fgd`` member breaks them.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import ClassVar

from fuyao.fragmentation import DEFAULT_MIX, ShapeMix, named_models
from fuyao.nodescheduler import gpu_used_after
from fuyao.spec import TaskRequests
from hub.fleet import ClusterInfo, Fit, NodeState
from hub.placement.framework import (
    MAX_SCORE,
    MIN_SCORE,
    SUCCESS,
    CycleState,
    Handle,
    PlacementRequest,
    Status,
)

NAME = "Fragmentation"
_NEUTRAL = 0.0
_NODES_KEPT = 200_000

# (growth, -fullness after, model of the devices taken), or None: the replica does not fit
NodeAnswer = tuple[float, float, str | None] | None
Entry = tuple[float, float, str, str | None]   # growth, -fullness, node, model: lowest wins
_TABLES_KEPT = 4096


class _Table:
    """One (cluster, request shape)'s node entries: what was judged, a min-heap per model."""

    __slots__ = ("current", "heaps", "seen")

    def __init__(self) -> None:
        self.seen: dict[str, NodeState] = {}
        self.current: dict[str, Entry | None] = {}
        self.heaps: dict[str | None, list[Entry]] = {}


class Fragmentation:
    """Chooses, per cluster, the node whose free GPUs stay most usable; ranks clusters by it."""

    name: ClassVar[str] = NAME

    def __init__(self, handle: Handle, mix: ShapeMix | None = None) -> None:
        self._threshold = handle.headroom_priority
        self.mix = mix or DEFAULT_MIX
        self._decision: CycleState | None = None
        self._growth: dict[str, float] = {}
        self._answers: dict[str, tuple[NodeState, dict[tuple[int, int, int, int], NodeAnswer]]] = {}
        self._tables: dict[tuple[str, str, TaskRequests], _Table] = {}

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """Record the least-fragmenting node as this cluster's fit (never rejects)."""
        if self._decision is not ctx:
            self._decision, self._growth = ctx, {}
        r = req.requests
        if not r.gpu_milli or r.replicas != 1:
            return SUCCESS
        tops = self._best(cluster, req)
        exempt = req.failover or req.priority >= self._threshold or cluster.headroom <= 0
        # Tasks free to use any model pay for eating into what pinned tasks need (the
        # mix's ``scarcity``; 0 without pinned shapes, as in the live default mix).
        held = bool(self.mix.pinned_share) and not named_models(req.selector)
        best = min(((e[0] + _scarcity(self.mix, cluster, e[3], r) if held else e[0], e)
                    for e in tops if exempt or _within_reserve(cluster, e[3], r)),
                   default=None)
        if best is not None:
            growth, (_, _, node, model) = best
            self._growth[cluster.name] = growth
            ctx.fits[cluster.name] = Fit((node,), model)
        return SUCCESS

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Raw: the least growth of fragmentation in this cluster (``normalize`` ranks it)."""
        if self._decision is not ctx:
            return _NEUTRAL
        return self._growth.get(cluster.name, _NEUTRAL)

    def normalize(self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
                  scores: list[float]) -> None:
        """Least growth -> 100, most -> 0 (all 100 when they are equal)."""
        if not scores:
            return
        low, high = min(scores), max(scores)
        if high - low <= 1e-9:
            scores[:] = [MAX_SCORE] * len(scores)
            return
        span = high - low
        scores[:] = [min(MAX_SCORE, max(MIN_SCORE, MAX_SCORE * (high - s) / span))
                     for s in scores]

    def _best(self, cluster: ClusterInfo, req: PlacementRequest) -> list[Entry]:
        """The cluster's least-fragmenting node of each device model, for this request shape.

        A ``_Table`` per (cluster, shape) keeps every node's entry in a heap per model; only
        nodes whose ``NodeState`` changed since the table last looked are judged again
        (entries of changed or removed nodes are dropped lazily when they reach the top).
        """
        key = (cluster.name, req.selector_key, req.requests)
        table = self._tables.get(key)
        if table is None:
            if len(self._tables) >= _TABLES_KEPT:
                self._tables.clear()
            table = self._tables[key] = _Table()
        seen, current, heaps = table.seen, table.current, table.heaps
        found = cluster.matching(req.selector, req.selector_key)
        for group in found.groups:
            for name, node in group.nodes.items():
                if seen.get(name) is node:
                    continue
                seen[name] = node
                answer = None
                if not found.per_node or req.selector.matches(node.labels):
                    answer = self._answer(node, req.requests)
                entry = None if answer is None else (answer[0], answer[1], name, answer[2])
                current[name] = entry
                if entry is not None:
                    heapq.heappush(heaps.setdefault(entry[3], []), entry)
        if sum(map(len, heaps.values())) > 4 * len(current) + 64:   # mostly stale: rebuild
            heaps.clear()
            for e in current.values():
                if e is not None:
                    heaps.setdefault(e[3], []).append(e)
            for heap in heaps.values():
                heapq.heapify(heap)
        tops: list[Entry] = []
        for heap in heaps.values():
            while heap:
                top = heap[0]
                name = top[2]
                if current.get(name) == top and cluster.node(name) is seen.get(name):
                    tops.append(top)
                    break
                heapq.heappop(heap)
        return tops

    def _answer(self, node: NodeState, r: TaskRequests) -> NodeAnswer:
        """One node's growth for this request shape, kept while the node is unchanged; ties
        go to the node with more GPU in use, then the name, as in the ``fgd`` member."""
        cpu, memory, gpu_milli, gpu_memory = r.cpu_milli, r.memory_mib, r.gpu_milli, \
            r.gpu_memory_mib
        if not node.schedulable or node.pods < 1 or node.cpu < cpu or node.mem < memory:
            return None
        kept = self._answers.get(node.name)
        if kept is None or kept[0] is not node:
            if len(self._answers) >= _NODES_KEPT:
                self._answers.clear()
            kept = self._answers[node.name] = (node, {})
        key = (cpu, memory, gpu_milli, gpu_memory)
        if key in kept[1]:
            return kept[1][key]
        frees: list[int] = []
        eligible: list[bool] = []
        models: list[str] = []
        for (model, device_memory), slot in node.classes.items():
            for free in slot.frees:
                frees.append(free)
                eligible.append(device_memory >= gpu_memory)
                models.append(model)
        found = self.mix.best(node.cpu, node.mem, frees, eligible, cpu, memory, gpu_milli,
                              models)
        answer = None if found is None else (
            found[0], -gpu_used_after(frees, r),
            models[found[1][0]])
        kept[1][key] = answer
        return answer


def _scarcity(mix: ShapeMix, cluster: ClusterInfo, model: str | None, r: TaskRequests) -> float:
    """The mix's ``scarcity`` of one replica on ``model`` in this cluster (its free GPU of
    that model against all its free GPU)."""
    if model is None or model not in mix.pinned_share:
        return 0.0
    free = {name: total - used for name in cluster.totals()
            for total, used in (cluster.device_milli(name),)}
    return mix.scarcity(model, free.get(model, 0), sum(free.values()), r.gpu_milli)


def _within_reserve(cluster: ClusterInfo, model: str | None, r: TaskRequests) -> bool:
    """Would one replica on ``model`` leave that model's headroom reserve free (what the
    ``Headroom`` filter checks for the fit's model)?"""
    if model is None:
        return True
    total, used = cluster.device_milli(model)
    return total > 0 and (total - used - r.gpu_milli) / total >= cluster.headroom - 1e-9
