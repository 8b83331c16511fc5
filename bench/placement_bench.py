"""Placement benchmark: decisions per second over a large synthetic fleet, vs a naive scan.

Builds a mixed fleet (H100/A100/V100/T4/CPU nodes, a few label groups per cluster, some
cards already busy, a few clusters NotReady or cordoned), then plays a stream of placement
requests through ``hub.placement.Scheduler``: each decision is timed, placed tasks are
reserved, old ones released, and agents' node reports arrive between decisions (each one
invalidates that cluster's cached verdicts). On the same states it times the scheduler
without its verdict cache, and two baselines making the same decisions on the same states:
``numpy_scan.NumpyScan`` (every decision, unless ``--numpy-decisions`` samples fewer), a
vectorized scan of all nodes with masks and per-cluster ``reduceat``, kept current after
every mutation; and - on a sample, because it is slow - the naive BASELINE below, a Python
loop over every node of every cluster. Every baseline decision is checked against the
engine's; the run fails if any disagrees. ``engine_vs_numpy`` is the ratio of the engine's
decisions/s to the numpy scan's, from the same run. Decisions are timed in CPU seconds of
this thread (``--clock wall`` for wall seconds): on a shared machine wall time also counts
the time other processes held the core.

    .venv/bin/python bench/placement_bench.py                 # 100 clusters x 1,000 nodes
    .venv/bin/python bench/placement_bench.py --quick --json  # CI size, JSON summary
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from numpy_scan import NumpyScan  # beside this script

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub import heap, native
from hub.fleet import ClusterInfo, FleetView, NodeState
from hub.placement import PlacementRequest, PlacementResult, Scheduler
from hub.placement.profile import DEFAULT_PROFILE, MODEL_CHOICES, TIGHTEST, Profile

GIB = 1024
# model, cards per node, device memory GiB, share of a cluster's nodes (before jitter)
NODE_KINDS = [("H100", 8, 80, 0.15), ("A100", 8, 80, 0.15), ("A100", 8, 40, 0.1),
              ("V100", 8, 32, 0.15), ("T4", 4, 16, 0.15), (None, 0, 0, 0.3)]
# name, requests (cpu milli, memory MiB, gpu milli, gpu memory MiB, replicas), selector, weight
SHAPES = [
    ("1xH100", (8000, 64 * GIB, 1000, 0, 1), "gpu-model=H100", 3),
    ("4xA100+", (16000, 128 * GIB, 4000, 0, 1), "gpu-model>=A100", 3),
    ("8xH100x2", (32000, 256 * GIB, 8000, 0, 2), "gpu-model>=H100, nvlink-enabled=true", 1),
    ("1x40Gi", (4000, 32 * GIB, 1000, 40 * GIB, 1), "", 2),
    ("V100-share", (2000, 8 * GIB, 500, 0, 1), "gpu-model=V100", 3),
    ("T4-share", (1000, 4 * GIB, 250, 0, 1), "gpu-model=T4, zone in (a, b)", 3),
    ("cpu", (4000, 16 * GIB, 0, 0, 1), "kubernetes.io/arch=amd64", 4),
    ("cpu-arm", (2000, 8 * GIB, 0, 0, 1), "kubernetes.io/arch=arm64", 1),
]


# -- the synthetic fleet ----------------------------------------------------------------------

def make_node(rng: random.Random, cluster: str, i: int, kind: tuple[str | None, int, int, float],
              busy: float) -> NodeInfo:
    model, cards, mem_gib, _ = kind
    name = f"{cluster}-n{i:05d}"
    zone = "abc"[i % 3]
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
              "fuyao.io/site": cluster,
              "kubernetes.io/arch": "arm64" if model is None and i % 4 == 0 else "amd64",
              "fuyao.io/gpu-node": "true" if model else "false",
              "fuyao.io/gpu-count": str(cards)}
    if model:
        labels |= {"fuyao.io/gpu-model": model, "fuyao.io/gpu-memory": f"{mem_gib}Gi",
                   "fuyao.io/gpu-vendor": "nvidia"}
        if model == "H100":
            labels["fuyao.io/nvlink-enabled"] = "true"
    devices = tuple(
        DeviceInfo(f"{name}/gpu{d}", model or "", mem_gib * GIB,
                   rng.choice((0, 500, 750)) if rng.random() < busy else 1000, mem_gib * GIB)
        for d in range(cards)
    )
    cpu, mem = (128_000, 1024 * GIB) if model else (64_000, 256 * GIB)
    used = rng.random() * busy
    return NodeInfo(name, labels, ResourceAmounts(cpu, mem, 110),
                    ResourceAmounts(int(cpu * (1 - used)), int(mem * (1 - used)), 100),
                    devices, unschedulable=rng.random() < 0.005)


def build_fleet(rng: random.Random, clusters: int, nodes: int) -> FleetView:
    fleet = FleetView()
    for c in range(clusters):
        name = f"member-{c:03d}"
        state = ClusterState.NOT_READY if rng.random() < 0.03 else ClusterState.READY
        fleet.upsert_cluster(name, labels={"region": f"r{c % 4}"}, weight=rng.randint(1, 5),
                             headroom=0.1, state=state, cordoned=rng.random() < 0.02)
        mix = [k[3] * rng.uniform(0.2, 1.8) for k in NODE_KINDS]
        busy = rng.uniform(0.1, 0.6)
        kinds = rng.choices(NODE_KINDS, weights=mix, k=nodes)
        fleet.replace_nodes(name, [make_node(rng, name, i, k, busy) for i, k in enumerate(kinds)])
    return fleet


def make_requests(rng: random.Random, count: int) -> list[PlacementRequest]:
    weights = [s[3] for s in SHAPES]
    out = []
    for i in range(count):
        _, (cpu, mem, gpu, gmem, replicas), selector, _ = rng.choices(SHAPES, weights=weights)[0]
        out.append(PlacementRequest(
            task_id=f"task-{i}", name=f"task-{i}",
            requests=TaskRequests(cpu, mem, gpu, gmem, replicas),
            selector=parse_selector(selector),
            priority=2000 if rng.random() < 0.05 else 0, failover=rng.random() < 0.02,
        ))
    return out


# -- BASELINE: a naive scheduler that scans every node of every cluster ----------------------

class NaiveScheduler:
    """BASELINE. The default profile's decision with no index, no grouping and no caches.

    Same semantics as ClusterReady + NodeFit + Headroom filters and the 2 x ClusterWeight +
    1 x Headroom + 2 x LeastOverqualified score (ClusterAffinity and AcceleratorFit are
    constant for these requests): every decision evaluates the selector on every node of
    every cluster and counts free devices node by node.
    """

    def __init__(self, fleet: FleetView, headroom_priority: int = 1000) -> None:
        self.fleet = fleet
        self.headroom_priority = headroom_priority

    def schedule(self, req: PlacementRequest) -> str | None:
        feasible: list[tuple[ClusterInfo, float, int]] = []
        for cluster in self.fleet.clusters():
            if not cluster.schedulable or cluster.name in req.exclude:
                continue
            fits, model = self._fit_model(cluster, req)
            if not fits:
                continue
            room = _room_after(cluster, req, model)
            may_use_reserve = req.failover or req.priority >= self.headroom_priority
            if not may_use_reserve and room < cluster.headroom - 1e-9:
                continue
            rank = DEFAULT_CATALOG.rank(model) if model and req.requests.gpu_milli else None
            feasible.append((cluster, room, -1 if rank is None else rank))
        if not feasible:
            return None
        top = max(c.weight for c, _, _ in feasible)
        ranks = [r for _, _, r in feasible if r >= 0]
        low, high = (min(ranks), max(ranks)) if ranks else (0, 0)
        best, best_total = None, float("-inf")
        for cluster, room, rank in feasible:
            weight_score = 100.0 * cluster.weight / top if top else 0.0
            modest = (100.0 if rank < 0 or high == low
                      else 100.0 * (high - rank) / (high - low))
            total = (2 * weight_score + max(0.0, min(100.0, 100 * room)) + 2 * modest)
            if total > best_total:
                best, best_total = cluster.name, total
        return best

    def _fit_model(self, cluster: ClusterInfo, req: PlacementRequest) -> tuple[bool, str | None]:
        """(fits, model): the model (None for CPU tasks) that fits every replica best."""
        r = req.requests
        capacity: dict[str | None, int] = {}
        for node in cluster.nodes():
            if not node.schedulable or not req.selector.matches(node.labels):
                continue
            per_node = _node_capacity(node, r)
            if per_node == 0:
                continue
            for model, devices in _device_capacity(node, r).items():
                capacity[model] = capacity.get(model, 0) + min(per_node, devices)
        fitting = [m for m, n in capacity.items() if n >= r.replicas]
        if not fitting:
            return False, None
        if r.gpu_milli == 0:
            return True, None
        if r.replicas == 1:
            # One replica: the tightest node of any model, sparing models whose headroom
            # reserve it would eat (hub.fleet.fit._tightest_fit); ties by most room.
            left = _tightest_left(cluster, req)
            return True, min(fitting, key=lambda m: (
                _in_reserve(cluster, m, r.gpu_milli), left.get(m, 1 << 30),
                -_room_after(cluster, req, m), m or ""))
        return True, min(fitting, key=lambda m: (-_room_after(cluster, req, m), m or ""))


def _tightest_left(cluster: ClusterInfo, req: PlacementRequest) -> dict[str | None, int]:
    """Per model, how tight the tightest node for one replica is: free whole cards left
    after it, or for a share the 100-milli bucket of the node's largest partly used card
    that holds it (10 for a whole free card), as hub.fleet.fit ranks them."""
    r = req.requests
    best: dict[str | None, int] = {}
    for node in cluster.nodes():
        if (not node.schedulable or not req.selector.matches(node.labels)
                or _node_capacity(node, r) == 0):
            continue
        free_cards: dict[str, int] = {}
        partial: dict[str, int] = {}
        for model, free in _devices(node, r):
            if 0 < free < 1000:
                partial[model] = max(partial.get(model, 0), free)
            free_cards[model] = free_cards.get(model, 0) + (free >= 1000)
        if r.gpu_milli < 1000:
            for model in free_cards.keys() | partial.keys():
                if partial.get(model, 0) >= r.gpu_milli:
                    tight = partial[model] // 100
                elif free_cards.get(model, 0):
                    tight = 10
                else:
                    continue
                best[model] = min(best.get(model, 1 << 30), tight)
        if r.gpu_milli >= 1000:
            cards = r.gpu_milli // 1000
            for model, count in free_cards.items():
                if count >= cards:
                    best[model] = min(best.get(model, 1 << 30), (count - cards) * 1000)
    return best


def _in_reserve(cluster: ClusterInfo, model: str | None, need: int) -> bool:
    if model is None:
        return False
    total, used = cluster.device_milli(model)
    return total > 0 and (total - used - need) / total < cluster.headroom - 1e-9


def _node_capacity(node: NodeState, r: TaskRequests) -> int:
    if node.cpu < r.cpu_milli or node.mem < r.memory_mib or node.pods < 1:
        return 0
    cap = node.pods
    if r.cpu_milli:
        cap = min(cap, node.cpu // r.cpu_milli)
    if r.memory_mib:
        cap = min(cap, node.mem // r.memory_mib)
    return cap


def _device_capacity(node: NodeState, r: TaskRequests) -> dict[str | None, int]:
    if r.gpu_milli == 0:
        return {None: r.replicas}
    out: dict[str | None, int] = {}
    whole: dict[str, int] = {}
    for model, free in _devices(node, r):
        if r.gpu_milli >= 1000:
            whole[model] = whole.get(model, 0) + (free >= 1000)
        else:
            out[model] = out.get(model, 0) + free // r.gpu_milli
    for model, cards in whole.items():
        out[model] = cards // (r.gpu_milli // 1000)
    return out


def _devices(node: NodeState, r: TaskRequests) -> Iterator[tuple[str, int]]:
    """(model, free share after holds) of each device with the requested device memory."""
    for (model, memory), slot in node.classes.items():
        if memory >= r.gpu_memory_mib:
            for free in slot.frees:
                yield model, free


def _room_after(cluster: ClusterInfo, req: PlacementRequest, model: str | None) -> float:
    r = req.requests

    def frac(total: int, used: int, need: int) -> float:
        return (1.0 if need == 0 else -1.0) if total <= 0 else (total - used - need) / total

    left = min(frac(cluster.cpu_total, cluster.cpu_used, r.cpu_milli * r.replicas),
               frac(cluster.memory_total, cluster.memory_used, r.memory_mib * r.replicas))
    if r.gpu_milli and model is not None:
        total, used = cluster.device_milli(model)
        left = min(left, frac(total, used, r.gpu_milli * r.replicas))
    return left


# -- the run ----------------------------------------------------------------------------------

def shape_of(req: PlacementRequest) -> tuple[object, ...]:
    """A request's shape as this bench counts them: at least as fine as the scheduler's own
    (its tables are kept per selector, requests, priority and failover), so a shape's first
    decision here is never a table the scheduler already holds."""
    return (req.selector_key, req.requests, req.priority, req.failover)


class Churn:
    """What happens on the fleet between two decisions, as on a busy hub.

    A placed task is reserved on the nodes it was given; the oldest reservations beyond
    ``live`` are released; and ``delta_rate`` agent node reports arrive on average (a random
    node of a random cluster, its cards each turned busy or free: each one invalidates that
    cluster's kept verdicts). ``changed(cluster, node names)`` hears of every node touched
    (a baseline kept current beside the fleet); ``clock`` times reserves and reports apart.
    The random draws are the bench's: the same seed, the same churn.
    """

    def __init__(self, fleet: FleetView, rng: random.Random, live: int, delta_rate: float,
                 clock: Callable[[], float] = time.thread_time,
                 changed: Callable[[str, Iterable[str]], None] | None = None) -> None:
        self.fleet, self.rng, self.live, self.delta_rate = fleet, rng, live, delta_rate
        self.clock, self.changed = clock, changed
        self.names = [c.name for c in fleet.clusters()]
        self.held: deque[str] = deque()
        self.reserve_t: list[float] = []
        self.delta_t: list[float] = []
        self.placed = 0

    def after(self, req: PlacementRequest, result: PlacementResult) -> None:
        """Apply what follows the decision ``result`` for ``req``."""
        fleet, rng, clock, changed = self.fleet, self.rng, self.clock, self.changed
        if result.cluster is not None:
            t0 = clock()
            fleet.reserve(result.cluster, req.task_id, req.requests, result.nodes,
                          model=result.model)
            self.reserve_t.append(clock() - t0)
            if changed is not None:
                changed(result.cluster, result.nodes)
            self.held.append(req.task_id)
            self.placed += 1
        while len(self.held) > self.live:
            held = fleet.reservation(self.held.popleft())
            assert held is not None
            fleet.release(held.task_id)
            if changed is not None:
                changed(held.cluster, held.nodes)
        rate = self.delta_rate
        for _ in range(int(rate) + (rng.random() < rate % 1)):
            name = rng.choice(self.names)
            cluster = fleet.cluster(name)
            assert cluster is not None
            victim = rng.choice(cluster.nodes()).info
            frees = tuple(DeviceInfo(d.id, d.model, d.memory_mib, rng.choice((0, 1000)),
                                     d.memory_mib) for d in victim.devices)
            fresh = NodeInfo(victim.name, victim.labels, victim.allocatable, victim.free, frees,
                             victim.unschedulable)
            t0 = clock()
            fleet.apply_delta(name, [fresh], [])
            self.delta_t.append(clock() - t0)
            if changed is not None:
                changed(name, [victim.name])


@dataclass
class Timings:
    """Per-decision latencies in seconds."""

    samples: list[float]

    def summary(self) -> dict[str, float]:
        if not self.samples:
            return {}
        ordered = sorted(self.samples)
        mean = statistics.fmean(ordered)
        return {
            "decisions": len(ordered),
            "decisions_per_s": round(1 / mean, 1),
            "mean_us": round(mean * 1e6, 1),
            "p50_us": round(ordered[len(ordered) // 2] * 1e6, 1),
            "p99_us": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6, 1),
        }


BENCH_PROFILE = replace(DEFAULT_PROFILE, model_choice=TIGHTEST)
"""The default profile with the model choice both baselines implement (the tightest node of
any model): ``least-overqualified``, the hub's default, is another order over the same fit
search (tests/placement/test_model_choice.py), not implemented by the baselines."""


def bench_profile(model_choice: str) -> Profile:
    """The profile the engine runs: BENCH_PROFILE, or the hub's default model order."""
    return BENCH_PROFILE if model_choice == TIGHTEST else replace(BENCH_PROFILE,
                                                                 model_choice=model_choice)


def run(args: argparse.Namespace) -> dict[str, object]:
    if args.gc == "hub":
        heap.settle()   # as hub.server does once it has started, before any member reports
    rng = random.Random(args.seed)
    started = time.perf_counter()
    fleet = build_fleet(rng, args.clusters, args.nodes)
    build_s = time.perf_counter() - started
    profile = bench_profile(args.model_choice)
    # The baselines implement the tightest order only: under another order they are timed
    # (the same scan of every node) but not compared; the uncached engine is.
    checked = profile.model_choice == TIGHTEST
    cached = Scheduler(fleet, profile)
    uncached = Scheduler(fleet, profile, cache=False)
    naive = NaiveScheduler(fleet)
    started = time.perf_counter()
    scan = NumpyScan(fleet)
    scan_build_s = time.perf_counter() - started
    reqs = make_requests(rng, args.decisions)
    stride = max(1, args.decisions // max(1, args.baseline_decisions))
    numpy_every = max(1, args.decisions // max(1, args.numpy_decisions or args.decisions))
    fast: list[float] = []
    steady: list[float] = []   # decisions after the first of their shape (below)
    shapes: set[tuple[object, ...]] = set()
    slow: list[float] = []
    base: list[float] = []
    vector: list[float] = []
    disagree_uncached = disagree_baseline = disagree_numpy = 0
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    churn = Churn(fleet, rng, args.live, args.delta_rate, clock, changed=scan.refresh)
    for i, req in enumerate(reqs):
        t0 = clock()
        result = cached.schedule(req)
        fast.append(clock() - t0)
        # The first decision of a shape builds its table over every cluster (a warm-up a
        # running hub pays once per shape): kept out of the steady figure. The key is at
        # least as fine as the scheduler's shape, so no table is built outside it.
        shape = shape_of(req)
        if shape in shapes:
            steady.append(fast[-1])
        shapes.add(shape)
        if args.uncached:
            t0 = clock()
            plain = uncached.schedule(req)
            slow.append(clock() - t0)
            disagree_uncached += plain.cluster != result.cluster
        if i % stride == 0 and len(base) < args.baseline_decisions:
            t0 = clock()
            chosen = naive.schedule(req)
            base.append(clock() - t0)
            disagree_baseline += checked and chosen != result.cluster
        if i % numpy_every == 0:
            t0 = clock()
            picked = scan.schedule(req)
            vector.append(clock() - t0)
            disagree_numpy += checked and picked != result.cluster
        churn.after(req, result)
    reserve_t, delta_t, placed = churn.reserve_t, churn.delta_t, churn.placed
    out: dict[str, object] = {
        "clusters": args.clusters, "nodes_per_cluster": args.nodes, "clock": args.clock,
        "model_choice": profile.model_choice, "baselines_checked": checked, "gc": args.gc,
        "engine": str(native.STATE),
        "fleet_build_s": round(build_s, 2), "placed": placed, "decisions": len(reqs),
        "indexed_cached": Timings(fast).summary(),
        "indexed_cached_steady": Timings(steady).summary(),
        "request_shapes": len(shapes),
        "indexed_uncached": Timings(slow).summary(),
        "baseline_naive_scan": Timings(base).summary(),
        "baseline_numpy_scan": Timings(vector).summary(),
        "numpy_build_s": round(scan_build_s, 2),
        "reserve_mean_us": round(statistics.fmean(reserve_t) * 1e6, 1) if reserve_t else None,
        "node_delta_mean_us": round(statistics.fmean(delta_t) * 1e6, 1) if delta_t else None,
        "disagreements_with_uncached": disagree_uncached,
        "disagreements_with_baseline": disagree_baseline,
        "disagreements_with_numpy": disagree_numpy,
    }
    if vector:
        out["engine_vs_numpy"] = round(statistics.fmean(vector) / statistics.fmean(fast), 2)
    if base:
        naive_mean = statistics.fmean(base)
        out["speedup_vs_baseline_cached"] = round(naive_mean / statistics.fmean(fast), 1)
        if slow:
            out["speedup_vs_baseline_uncached"] = round(naive_mean / statistics.fmean(slow), 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per cluster")
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--baseline-decisions", type=int, default=100,
                        help="decisions sampled for the (slow) naive baseline")
    parser.add_argument("--numpy-decisions", type=int, default=0,
                        help="decisions timed for the numpy scan baseline (default: all)")
    parser.add_argument("--live", type=int, default=5000,
                        help="reservations kept before the oldest is released")
    parser.add_argument("--delta-rate", type=float, default=0.5,
                        help="agent node reports applied per decision")
    parser.add_argument("--no-uncached", dest="uncached", action="store_false",
                        help="skip timing the scheduler without its verdict cache")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="time decisions in this thread's CPU seconds (default: what the "
                             "load of a shared machine moves least) or wall seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gc", choices=("python", "hub"), default="python",
                        help="the collector's settings: Python's defaults, or the hub "
                             "process's (hub.heap.settle: frozen start, larger thresholds)")
    parser.add_argument("--model-choice", choices=MODEL_CHOICES, default=TIGHTEST,
                        help="the engine's model order: tightest (what the baselines implement "
                             "and are checked against) or least-overqualified (the hub's "
                             "default: checked against the uncached engine only)")
    parser.add_argument("--quick", action="store_true", help="CI size: 10 x 200, 1,000 decisions")
    parser.add_argument("--json", action="store_true", help="print only a JSON summary")
    parser.add_argument("--queues", type=int, default=0,
                        help="also time the same requests through N queues (queue_pass.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.clusters, args.nodes, args.decisions = 10, 200, 1000
        args.baseline_decisions = min(args.baseline_decisions, 50)
        args.live = min(args.live, 500)
    out = run(args)
    if args.queues:
        from queue_pass import ab

        out["queueing"] = ab(lambda: build_fleet(random.Random(args.seed), args.clusters,
                                                 args.nodes),
                             make_requests(random.Random(args.seed + 1), args.decisions),
                             args.queues, args.live)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:44} {value}")
    agree = (out["disagreements_with_uncached"] == out["disagreements_with_baseline"]
             == out["disagreements_with_numpy"] == 0)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
