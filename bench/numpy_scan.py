"""BASELINE for ``placement_bench.py``: the default profile's decision as a numpy scan.

``NumpyScan`` lays every node of every cluster out in arrays (clusters in name order, each
cluster's nodes contiguous): free cpu, memory and pods after the hub's reservations, the
schedulable flag, a label-set id, and per device slot (``[nodes, 8]``) its model, memory and
free share. Each decision scans all of them with masks and per-cluster reductions
(``np.add.reduceat`` for capacities, ``np.minimum.reduceat`` for the tightest node): no
index, no verdict cache, nothing kept between decisions but the arrays themselves. What is
kept up to date on every mutation (``refresh``, called by the bench after each reservation,
release and node report, untimed - as the engine's own bookkeeping is not timed either):
the rows of the nodes that changed and each cluster's cpu, memory and per-model device sums
(what the fleet view keeps as running sums too). A selector is evaluated once per label set
(labels minus per-node keys) and its node mask kept until a node's labels change.

The rules are the default profile's, as ``placement_bench.NaiveScheduler`` states them:
ClusterReady (schedulable, not excluded), NodeFit (replicas fit on nodes that match, with
cpu, memory, a pod slot and whole cards or a share of one model with the device memory),
the model chosen as ``hub.fleet.fit`` chooses it (one replica: the tightest node of any
model, sparing models whose headroom the replica would eat, then most room, then name;
several: most room, then name), Headroom (filter and score), ClusterWeight and
LeastOverqualified (normalized over the feasible clusters), AcceleratorFit (CPU-only tasks:
the share of replicas that fit on nodes without devices). ClusterAffinity and
TaintToleration score 100 everywhere for the bench's requests (no cluster selectors,
preferences or taints) and are added as constants. Totals are summed in the profile's
order so equal totals are equal here too; ties go to the first cluster name. Not handled:
selectors on per-node keys (hostname), and nodes that join or leave after the build.
The bench counts every decision where this scan picks another cluster than the engine.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

from fuyao.catalog import DEFAULT_CATALOG
from hub.fleet import FleetView, NodeState
from hub.fleet.view import PER_NODE_LABEL_KEYS
from hub.placement import PlacementRequest

Ints = NDArray[np.int64]
Bools = NDArray[np.bool_]
Floats = NDArray[np.float64]
_BIG = 1 << 30
_SLOTS = 8   # device slots per node row


class NumpyScan:
    """BASELINE. One decision = one vectorized pass over every node of the fleet."""

    def __init__(self, fleet: FleetView, headroom_priority: int = 1000) -> None:
        self.fleet = fleet
        self.headroom_priority = headroom_priority
        clusters = fleet.ordered
        self.names = [c.name for c in clusters]
        self.models = sorted({model for c in clusters for n in c.nodes()
                              for model, _ in n.classes})
        self._model_id = {m: i for i, m in enumerate(self.models)}
        states = [(ci, n) for ci, c in enumerate(clusters) for n in c.nodes()]
        count = len(states)
        self.row = {(clusters[ci].name, n.name): i for i, (ci, n) in enumerate(states)}
        self._position = {name: ci for ci, name in enumerate(self.names)}
        self.cluster_of = np.array([ci for ci, _ in states], dtype=np.int64)
        self.alloc_cpu = np.zeros(count, np.int64)
        self.alloc_mem = np.zeros(count, np.int64)
        self.cpu = np.zeros(count, np.int64)
        self.mem = np.zeros(count, np.int64)
        self.pods = np.zeros(count, np.int64)
        self.sched = np.zeros(count, np.bool_)
        self.plain = np.zeros(count, np.bool_)            # no devices on the node
        self.label_id = np.zeros(count, np.int64)
        self.dev_model = np.full((count, _SLOTS), -1, np.int32)
        self.dev_mem = np.zeros((count, _SLOTS), np.int32)
        self.dev_free = np.zeros((count, _SLOTS), np.int32)
        self.model_mem = np.full((count, len(self.models)), -1, np.int64)  # its largest memory
        self._label_sets: dict[frozenset[tuple[str, str]], int] = {}
        self._masks: dict[str, Bools] = {}
        size = len(clusters)
        self.weight = np.array([c.weight for c in clusters], np.float64)
        self.headroom = np.array([c.headroom for c in clusters], np.float64)
        self.open = np.array([c.schedulable for c in clusters], np.bool_)
        self.cpu_total = np.zeros(size, np.int64)
        self.cpu_used = np.zeros(size, np.int64)
        self.mem_total = np.zeros(size, np.int64)
        self.mem_used = np.zeros(size, np.int64)
        self.dev_total = np.zeros((size, len(self.models)), np.int64)
        self.dev_used = np.zeros((size, len(self.models)), np.int64)
        self.ranks = np.array([-1 if (r := DEFAULT_CATALOG.rank(m)) is None else r
                               for m in self.models], np.float64)
        for i, (_, state) in enumerate(states):
            self._write(i, state)
        for ci in range(size):
            self._sums(ci)

    # -- keeping the arrays current (untimed) ------------------------------------------------

    def refresh(self, cluster: str, nodes: Iterable[str]) -> None:
        """Re-read these nodes of ``cluster`` and its sums from the fleet view."""
        info = self.fleet.cluster(cluster)
        assert info is not None
        for name in nodes:
            state = info.node(name)
            assert state is not None, "the baseline does not follow nodes joining or leaving"
            self._write(self.row[cluster, name], state)
        self._sums(self._position[cluster])

    def _write(self, i: int, state: NodeState) -> None:
        alloc = state.alloc if hasattr(state, "alloc") else state.info.allocatable  # older hubs
        self.alloc_cpu[i], self.alloc_mem[i] = alloc.cpu_milli, alloc.memory_mib
        self.cpu[i], self.mem[i], self.pods[i] = state.cpu, state.mem, state.pods
        self.sched[i] = state.schedulable
        self.plain[i] = not state.classes
        key = frozenset(kv for kv in state.labels.items() if kv[0] not in PER_NODE_LABEL_KEYS)
        label = self._label_sets.setdefault(key, len(self._label_sets))
        if label != self.label_id[i]:
            self.label_id[i] = label
            self._masks.clear()
        self.dev_model[i], self.dev_mem[i], self.dev_free[i], self.model_mem[i] = -1, 0, 0, -1
        devices = [(model, memory, free) for (model, memory), slot in state.classes.items()
                   for free in slot.frees]
        for slot, (model, memory, free) in enumerate(devices):
            m = self._model_id[model]
            self.model_mem[i, m] = max(self.model_mem[i, m], memory)
            self.dev_model[i, slot], self.dev_mem[i, slot], self.dev_free[i, slot] = m, memory, free

    def _sums(self, ci: int) -> None:
        c = self.fleet.ordered[ci]
        self.cpu_total[ci], self.cpu_used[ci] = c.cpu_total, c.cpu_used
        self.mem_total[ci], self.mem_used[ci] = c.memory_total, c.memory_used
        for m, model in enumerate(self.models):
            self.dev_total[ci, m], self.dev_used[ci, m] = c.device_milli(model)

    def _mask(self, req: PlacementRequest) -> Bools:
        key = req.selector_key
        mask = self._masks.get(key)
        if mask is None:
            lut = np.zeros(len(self._label_sets), np.bool_)
            for labels, i in self._label_sets.items():
                lut[i] = req.selector.matches(dict(labels))
            mask = self._masks[key] = lut[self.label_id]
        return mask

    # -- the decision (timed) ----------------------------------------------------------------

    def schedule(self, req: PlacementRequest) -> str | None:
        """The cluster the default profile picks, or None."""
        r = req.requests
        ok = self._mask(req) & self.sched & (self.cpu >= r.cpu_milli) & (
            self.mem >= r.memory_mib) & (self.pods >= 1)
        rows = np.flatnonzero(ok)
        cl = self.cluster_of[rows]
        cap = self.pods[rows]
        if r.cpu_milli:
            cap = np.minimum(cap, self.cpu[rows] // r.cpu_milli)
        if r.memory_mib:
            cap = np.minimum(cap, self.mem[rows] // r.memory_mib)
        open_ = self.open.copy()
        for name in req.exclude:
            open_[self._position[name]] = False
        cpu_mem = np.minimum(
            _fraction(self.cpu_total, self.cpu_used, r.cpu_milli * r.replicas),
            _fraction(self.mem_total, self.mem_used, r.memory_mib * r.replicas))
        if r.gpu_milli == 0:
            seg = _Segments(cl, len(self.names))
            fits = seg.sum(cap) >= r.replicas
            room, rank = cpu_mem, np.full(len(self.names), -1.0)
            plain = np.minimum(seg.sum(cap * self.plain[rows]), r.replicas)
            accel = 100.0 * plain / max(1, r.replicas)
        else:
            fits, room, rank = self._gpu_choice(req, rows, cap, cpu_mem)
            accel = np.full(len(self.names), 100.0)
        may_reserve = req.failover or req.priority >= self.headroom_priority
        feasible = open_ & fits
        if not may_reserve:
            feasible &= room >= self.headroom - 1e-9
        if not feasible.any():
            return None
        top = self.weight[feasible].max()
        weight = 100.0 * self.weight / top if top > 0 else np.zeros(len(self.names))
        ranked = rank[feasible & (rank >= 0)]
        low, high = (ranked.min(), ranked.max()) if ranked.size else (0.0, 0.0)
        modest = (np.full(len(self.names), 100.0) if high == low else
                  np.where(rank < 0, 100.0, 100.0 * (high - rank) / (high - low)))
        headroom = np.clip(100.0 * room, 0.0, 100.0)
        # the profile's order: Headroom x1, AcceleratorFit x3, ClusterAffinity x3 and
        # TaintToleration x3 (100 here), then ClusterWeight x2, LeastOverqualified x2
        total = 0.0 + 1.0 * headroom
        total = total + 3.0 * accel
        total = total + 3.0 * 100.0
        total = total + 3.0 * 100.0
        total = total + 2.0 * weight
        total = total + 2.0 * modest
        return self.names[int(np.argmax(np.where(feasible, total, -np.inf)))]

    def _gpu_choice(
        self, req: PlacementRequest, rows: Ints, cap: Ints, cpu_mem: Floats,
    ) -> tuple[Bools, Floats, Floats]:
        """Per cluster: does some model fit, the room left with the chosen one, its rank."""
        r = req.requests
        size = len(self.names)
        whole = r.gpu_milli >= 1000
        cards = r.gpu_milli // 1000
        best_fit = np.zeros(size, np.bool_)
        best = (np.zeros(size, np.bool_), np.full(size, _BIG), np.full(size, np.inf))
        best_room, best_rank = np.full(size, -np.inf), np.full(size, -1.0)
        has = self.model_mem[rows] >= r.gpu_memory_mib
        for m in range(len(self.models)):   # model ids in name order
            sub = has[:, m]
            if not sub.any():
                continue
            cut = rows[sub]      # the rows with a device of this model, then per device slot
            dfree = self.dev_free[cut]
            dok = (self.dev_model[cut] == m) & (self.dev_mem[cut] >= r.gpu_memory_mib)
            full = ((dfree >= 1000) & dok).sum(axis=1)
            devcap = full // cards if whole else ((dfree // r.gpu_milli) * dok).sum(axis=1)
            seg_m = _Segments(self.cluster_of[cut], size)
            fits = seg_m.sum(np.minimum(cap[sub], devcap)) >= r.replicas
            total, used = self.dev_total[:, m], self.dev_used[:, m]
            room = np.minimum(cpu_mem, _fraction(total, used, r.gpu_milli * r.replicas))
            if r.replicas == 1:
                in_reserve = (total > 0) & (
                    _fraction(total, used, r.gpu_milli) < self.headroom - 1e-9)
                if whole:
                    tight = np.where(full >= cards, (full - cards) * 1000, _BIG)
                else:
                    part = np.where(dok & (dfree > 0) & (dfree < 1000), dfree, 0).max(axis=1)
                    tight = np.where(part >= r.gpu_milli, part // 100,
                                     np.where(full > 0, 10, _BIG))
                left = seg_m.min(tight, _BIG)
                b_res, b_left, b_neg = best
                better = ~best_fit | (in_reserve < b_res) | (in_reserve == b_res) & (
                    (left < b_left) | (left == b_left) & (-room < b_neg))
            else:
                better = ~best_fit | (-room < best[2])
                in_reserve, left = best[0], best[1]
            take = fits & better
            best = (np.where(take, in_reserve, best[0]), np.where(take, left, best[1]),
                    np.where(take, -room, best[2]))
            best_room = np.where(take, room, best_room)
            best_rank = np.where(take, self.ranks[m], best_rank)
            best_fit |= fits

        return best_fit, best_room, best_rank


class _Segments:
    """Per-cluster reductions over rows sorted by cluster (some clusters may have none)."""

    def __init__(self, cluster_of: Ints, size: int) -> None:
        self.size = size
        self.length = len(cluster_of)
        starts = np.searchsorted(cluster_of, np.arange(size))
        self.empty = np.diff(np.append(starts, self.length)) == 0
        self.starts = np.minimum(starts, max(0, self.length - 1))

    def sum(self, values: Ints) -> Ints:
        if not self.length:
            return np.zeros(self.size, np.int64)
        out = np.add.reduceat(values, self.starts)
        out[self.empty] = 0
        return out

    def min(self, values: Ints, empty: int) -> Ints:
        if not self.length:
            return np.full(self.size, empty)
        out = np.minimum.reduceat(values, self.starts)
        out[self.empty] = empty
        return out


def _fraction(total: Ints, used: Ints, need: int) -> Floats:
    """``(total - used - need) / total``; 1 (nothing needed) or -1 where total is 0."""
    safe = np.where(total > 0, total, 1)
    return np.where(total > 0, (total - used - need) / safe, 1.0 if need == 0 else -1.0)
