"""Hub memory benchmark: what a fleet of C clusters x N nodes costs the hub, and its build time.

Builds the same synthetic fleet as ``placement_bench.py`` (its node kinds, labels and busy
cards), one cluster at a time as the agent channel receives them: a cluster's ``NodeInfo``
reports are generated (timed apart: the generator is not the hub), handed to
``FleetView.upsert_cluster`` + ``replace_nodes`` (timed: node states, label groups, buckets,
per-model sums), then dropped - the fleet view keeps no ``NodeInfo``, only its own compact
node states. What a report itself costs is measured on the first cluster's (``tracemalloc``).

It reports the resident set (RSS) before and after, the process's peak, the hub's bytes per
node, the seconds spent generating and ingesting (wall and CPU, and how much of each the
cyclic garbage collector took). The collector is set as the hub process sets it
(``hub.heap.settle``: what is loaded frozen, larger thresholds; ``--default-gc`` keeps
CPython's), and each inventory is filed inside ``hub.heap.inventory`` as the agent channel
files it (a full collection before, the collector paused, a freeze after; ``--no-freeze``
only pauses the collector, as before). Generation runs with the collector paused (its passes would
walk the whole fleet built so far: the bench's cost, not the hub's); the one pass it defers
runs as generation ends and is counted there. Then it times a few hundred decisions
on the built fleet so a memory saving is never bought with speed unseen. One process per
run: RSS is the operating system's figure, not an estimate. ``--all-reports`` generates
every report first and keeps them until the fleet is built (the old two-phase measure: then
the peak holds every report and the fleet at once).

What the hub does with an agent's inventory is more than ``replace_nodes``: it parses the
``Inventory`` message and files its ``pb.Node``s as received (``hub.agent_service``,
``OperatedCatalog.reports``: without a catalog no ``NodeInfo`` is built).
``--from-wire`` encodes every cluster's reports (generation) and times the parsing as part
of the ingest, the whole path the agent channel takes. ``wire_decode_us_per_node`` times
decoding the first cluster's reports into ``NodeInfo``s (``node_from_proto``: what a delta's
nodes still go through, and an inventory's did before), ``wire_encode_us_per_node`` the
agent's encoding of them. A node's devices go as ``DeviceColumns`` (what an agent sends a
hub that announces ``device-columns``); ``--wire-devices messages`` sends one ``Device``
message each, as older agents and hubs do. Labels go once per distinct set (``label-sets``,
``fuyao.labelsets``); ``--wire-labels maps`` sends each node its whole map.

    .venv/bin/python bench/memory_bench.py                      # 1,000 clusters x 1,000 nodes
    .venv/bin/python bench/memory_bench.py --from-wire          # the same, ingest from the wire
    .venv/bin/python bench/memory_bench.py --quick --json        # CI size: 10 x 200
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime

from placement_bench import NODE_KINDS, make_node, make_requests  # beside this script
from pydantic import BaseModel

from fuyao.capacity import FitRequest
from fuyao.inventory import NodeInfo, node_from_proto
from fuyao.labelsets import encode, expand
from fuyao.spec import ClusterState, TaskSpec, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub import heap, native
from hub.activetask import ActiveTask
from hub.catalogs import OperatedCatalog
from hub.config import Timings
from hub.fleet import FleetView, collector_paused
from hub.placement import DEFAULT_PROFILE, Scheduler
from hub.planning.history import CapacityHistory
from hub.planning.planner import Planner

MIB = 1024 * 1024


def rss_bytes() -> int:
    """The process's resident set now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes() -> int:
    """The process's peak resident set so far (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reports(rng: random.Random, clusters: int, nodes: int) -> Iterator[tuple[str, list[NodeInfo]]]:
    """Each cluster's node reports in turn, drawn as ``placement_bench.build_fleet`` draws."""
    for c in range(clusters):
        name = f"member-{c:03d}"
        mix = [k[3] * rng.uniform(0.2, 1.8) for k in NODE_KINDS]
        busy = rng.uniform(0.1, 0.6)
        kinds = rng.choices(NODE_KINDS, weights=mix, k=nodes)
        yield name, [make_node(rng, name, i, k, busy) for i, k in enumerate(kinds)]


def report_bytes(rng: random.Random, nodes: int) -> int:
    """Bytes per node of one cluster's reports, as ``tracemalloc`` counts them."""
    tracemalloc.start()
    sample = next(reports(rng, 1, nodes))
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del sample
    return round(size / nodes)


def encoded(nodes: list[NodeInfo], columns: bool = True, label_sets: bool = True) -> bytes:
    """One cluster's reports as the agent sends them (an ``Inventory`` message; ``columns``:
    devices as ``DeviceColumns``, ``label_sets``: labels once per distinct set, what an agent
    sends a hub that announced them)."""
    wire, sets = encode(nodes, columns, label_sets)
    return pb.Inventory(nodes=wire, label_sets=sets).SerializeToString()


def decoded(raw: bytes) -> list[NodeInfo]:
    """An inventory decoded into ``NodeInfo``s (what the agent channel does with a delta's
    nodes, and did with an inventory's before it filed the wire's messages as received)."""
    inventory = pb.Inventory.FromString(raw)
    return [node_from_proto(n) for n in expand(inventory.nodes, inventory.label_sets)]


_CATALOG = OperatedCatalog(None)   # the hub's without a ``catalog`` in its config


def ingest(fleet: FleetView, name: str, nodes: list[NodeInfo] | bytes, count: int,
           freeze: bool) -> None:
    """One cluster's inventory into the fleet as ``hub.agent_service`` takes it in:
    parsed (when encoded; its nodes filed as received, ``OperatedCatalog.reports``) and filed
    inside ``hub.heap.inventory`` (the collector paused; a large inventory collected before
    and frozen after), or, without ``freeze``, with the collector only paused."""
    with heap.inventory(count) if freeze else collector_paused():
        if isinstance(nodes, bytes):
            inventory = pb.Inventory.FromString(nodes)
            fleet.replace_nodes(name, _CATALOG.reports(inventory.nodes), inventory.label_sets)
        else:
            fleet.replace_nodes(name, nodes)


def wire_us(rng: random.Random, nodes: int, columns: bool,
            label_sets: bool) -> tuple[float, float, float]:
    """One cluster's reports on the wire: the agent's CPU microseconds per node to encode
    them, the hub's to decode them into ``NodeInfo``s (best of 3 each), and bytes per node."""
    made = next(reports(rng, 1, nodes))[1]
    best_encode = best_decode = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        raw = encoded(made, columns, label_sets)
        c1 = time.process_time()
        decoded(raw)
        best_encode = min(best_encode, c1 - c0)
        best_decode = min(best_decode, time.process_time() - c1)
    return (round(best_encode / nodes * 1e6, 2), round(best_decode / nodes * 1e6, 2),
            round(len(raw) / nodes, 1))


class CollectorClock:
    """CPU seconds the cyclic garbage collector took, read per phase (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.total += time.process_time() - self._start

    def close(self) -> None:
        gc.callbacks.remove(self._tick)


async def _stall(work: Callable[[], Awaitable[object]], tick: float = 0.0) -> dict[str, float]:
    """``work`` once while another task ticks on the loop every ``tick`` seconds: the longest
    gap between ticks (the loop's longest stall, in ms) and the process's CPU seconds. With
    ``tick`` 0 the ticker spins whenever it has the loop: for work on the loop; for work in a
    worker thread it takes a share of the CPU counted (~0.6 s a second of the worker's, as
    ``control`` measured), so ``answers`` ticks every ms."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(tick)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    c0 = time.process_time()
    await work()
    cpu = time.process_time() - c0
    done.set()
    await task
    return {"longest_stall_ms": round(max(gaps) * 1e3, 1), "cpu_s": round(cpu, 2)}


def planning(fleet: FleetView) -> dict[str, list[dict[str, float]]]:
    """What planning does on the hub's loop, each twice, alternated: a capacity sample
    (``CapacityHistory.snapshot_stepwise``, the live view a cluster at a time), the fleet copy
    the REST answers think on (``Planner.frozen_stepwise``) and the same copy made at once
    (``Planner.frozen``: what the sample did on the loop before it went stepwise, then
    computed its rows from the copy in a thread)."""
    planner = Planner(fleet, DEFAULT_PROFILE, {})
    history = CapacityHistory(planner, None, Timings())  # type: ignore[arg-type]

    async def at_once() -> None:
        planner.frozen()
        await asyncio.sleep(0)

    kinds: dict[str, Callable[[], Awaitable[object]]] = {
        "sample": lambda: history.snapshot_stepwise(datetime.now(UTC)),
        "copy_stepwise": planner.frozen_stepwise, "copy_at_once": at_once}
    out: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for kind in [*kinds, *reversed(kinds)]:
        out[kind].append(asyncio.run(_stall(kinds[kind])))
    return out


ANSWER_SPECS = (TaskSpec(name="one", gpu=1), TaskSpec(name="half", gpu="500m"),
                TaskSpec(name="two", gpu=2), TaskSpec(name="cpu", cpu=4))


def placed_tasks(fleet: FleetView, count: int) -> dict[str, ActiveTask]:
    """``count`` tasks (1 card, half a card, 2 cards, 4 cores in turn) placed by the scheduler
    and reserved, as the hub's active tasks: N-1 re-places them, the report's mix is theirs."""
    now = datetime.now(UTC)
    scheduler = Scheduler(fleet)
    active: dict[str, ActiveTask] = {}
    for seq in range(count):
        spec = ANSWER_SPECS[seq % len(ANSWER_SPECS)]
        # "answer-": the decisions timed after the answers reserve as "task-<i>"
        task = ActiveTask(id=f"answer-{seq}", name=f"answer-{seq}", spec=spec,
                          state=TaskState.QUEUED, queue="default", priority=0, seq=seq,
                          created_at=now, updated_at=now)
        result = scheduler.schedule(task.request())
        if result.cluster is not None and scheduler.reserve(task.request(), result).ok:
            task.state, task.cluster, task.node = TaskState.PLACED, result.cluster, result.nodes[0]
        active[task.id] = task
    return active


CONTROL_SECONDS = 1.0
MAX_ANSWER_TASKS = 1_000_000   # --answer-tasks: tasks placed before the answers
MAX_ANSWER_ROUNDS = 20         # --answer-rounds: each a report, n-1 and fit (minutes at scale)
ANSWER_TICK = 0.001   # the ticker's period while an answer is timed (its stall includes it)


class _Digest(BaseModel):
    """What the control "answers": how many steps it took."""

    steps: int


def _spin(seconds: float) -> _Digest:
    """Pure Python work in a worker thread for ``seconds`` of CPU (holding the GIL)."""
    steps, end = 0, time.thread_time() + seconds
    while time.thread_time() < end:
        steps += sum(range(100))
    return _Digest(steps=0)


def answers(fleet: FleetView, active: Mapping[str, ActiveTask],
            rounds: int) -> dict[str, list[dict[str, object]]]:
    """The REST planning answers as ``hub.api.planning`` asks them (``Planner.answer`` with
    the cache bypassed, ``Planner.fit_async``; ``fit``: 1 card, the default limit), each
    ``rounds`` times, alternated: the event loop's longest stall and the CPU (process time,
    the worker thread's included), and a digest of the answer. The calls are the same in
    trees before the shared copy: run this script with ``PYTHONPATH`` at another tree to time
    its answers; equal digests from the same ``--seed`` are equal answers. ``control`` is no
    answer: a worker thread computing for ``CONTROL_SECONDS``, the stall the GIL and the
    machine's load alone give the loop."""
    planner = Planner(fleet, DEFAULT_PROFILE, active)
    kinds: dict[str, Callable[[], Awaitable[BaseModel]]] = {
        "report": lambda: planner.answer(None, lambda p: p.report()),
        "n-1": lambda: planner.answer(None, lambda p: p.n_minus_one()),
        "fit": lambda: planner.fit_async(FitRequest(gpu=1)),
        "control": lambda: asyncio.to_thread(_spin, CONTROL_SECONDS),
    }
    out: dict[str, list[dict[str, object]]] = {kind: [] for kind in kinds}
    order = [*kinds, *reversed(kinds)] * rounds
    for kind in order[:len(kinds) * rounds]:
        found: list[BaseModel] = []

        async def ask(kind: str = kind, found: list[BaseModel] = found) -> None:
            found.append(await kinds[kind]())

        timed: dict[str, object] = {**asyncio.run(_stall(ask, ANSWER_TICK))}
        timed["digest"] = hashlib.sha256(found[0].model_dump_json().encode()).hexdigest()[:16]
        out[kind].append(timed)
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    if not args.default_gc:
        heap.settle()   # the collector's settings the hub process runs with (hub.server)
    rng = random.Random(args.seed)
    total_nodes = args.clusters * args.nodes
    per_report = report_bytes(random.Random(args.seed), args.nodes)
    columns = args.wire_devices == "columns"
    label_sets = args.wire_labels == "sets"
    encode_us, decode_us, wire_bytes = wire_us(random.Random(args.seed), args.nodes, columns,
                                               label_sets)
    gc.collect()
    base = rss_bytes()
    fleet = FleetView()
    made = reports(rng, args.clusters, args.nodes)
    kept: list[object] = []
    reports_s = fleet_s = reports_cpu = fleet_cpu = reports_gc = fleet_gc = 0.0
    collector = CollectorClock()
    for c in range(args.clusters):
        t0, c0, g0 = time.perf_counter(), time.process_time(), collector.total
        with collector_paused():   # the generator's own cost; see the module docstring
            name, nodes = next(made)
            report: list[NodeInfo] | bytes = (encoded(nodes, columns, label_sets) if args.from_wire
                                                  else nodes)
            del nodes
            if not args.no_freeze:
                gc.freeze()   # reports the hub would decode inside the ingest: see --no-freeze
        t1, c1, g1 = time.perf_counter(), time.process_time(), collector.total
        fleet.upsert_cluster(name, labels={"region": f"r{c % 4}"}, weight=1 + c % 5,
                             headroom=0.1, state=ClusterState.READY)
        ingest(fleet, name, report, args.nodes, not args.no_freeze)
        if args.all_reports:
            kept.append(report)
        del report
        fleet_s += time.perf_counter() - t1
        fleet_cpu += time.process_time() - c1
        fleet_gc += collector.total - g1
        reports_s += t1 - t0
        reports_cpu += c1 - c0
        reports_gc += g1 - g0
    collector.close()
    del kept
    gc.collect()
    after_fleet = rss_bytes()
    copies = planning(fleet) if args.planning else None
    load = os.getloadavg()[0]
    active = placed_tasks(fleet, args.answer_tasks) if args.answers else {}
    answered = answers(fleet, active, args.answer_rounds) if args.answers else None
    scheduler = Scheduler(fleet)
    times: list[float] = []
    for req in make_requests(rng, args.decisions):
        t0 = time.perf_counter()
        result = scheduler.schedule(req)
        times.append(time.perf_counter() - t0)
        if result.cluster is not None:
            fleet.reserve(result.cluster, req.task_id, req.requests, result.nodes,
                          model=result.model)
    return {
        "clusters": args.clusters, "nodes_per_cluster": args.nodes, "nodes": total_nodes,
        "all_reports_kept": args.all_reports, "from_wire": args.from_wire,
        "engine": str(native.STATE),
        "collector": ("CPython defaults" if args.default_gc else "hub.heap.settle")
                     + ("" if args.no_freeze else ", hub.heap.inventory"),
        "rss_base_mib": round(base / MIB, 1),
        "rss_after_fleet_mib": round(after_fleet / MIB, 1),
        "peak_rss_mib": round(peak_rss_bytes() / MIB, 1),
        "peak_rss_gib": round(peak_rss_bytes() / MIB / 1024, 2),
        "report_bytes_per_node": per_report,
        "hub_bytes_per_node": round((after_fleet - base) / total_nodes),
        "reports_build_s": round(reports_s, 2),
        "fleet_build_s": round(fleet_s, 2),
        "reports_build_cpu_s": round(reports_cpu, 2),   # CPU seconds: what load does not move
        "fleet_build_cpu_s": round(fleet_cpu, 2),
        "fleet_build_cpu_us_per_node": round(fleet_cpu / total_nodes * 1e6, 2),
        "reports_build_gc_cpu_s": round(reports_gc, 2),   # the collector's part of each
        "fleet_build_gc_cpu_s": round(fleet_gc, 2),
        "wire_devices": args.wire_devices,
        "wire_labels": args.wire_labels,
        "wire_encode_us_per_node": encode_us,            # the agent's, per node
        "wire_bytes_per_node": wire_bytes,
        "wire_decode_us_per_node": decode_us,            # not in fleet_build unless from_wire
        "decisions": len(times),
        "decision_mean_us": round(statistics.fmean(times) * 1e6, 1) if times else None,
        "planning": copies,
        "answers": answered,
        "answer_tasks": len(active),
        "load_before_answers": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per cluster")
    parser.add_argument("--decisions", type=int, default=300,
                        help="placement decisions timed on the built fleet")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--all-reports", action="store_true",
                        help="keep every cluster's reports until the fleet is built")
    parser.add_argument("--from-wire", action="store_true",
                        help="encode each cluster's reports as the agent does and time their "
                             "decoding as part of the ingest")
    parser.add_argument("--wire-devices", choices=("columns", "messages"), default="columns",
                        help="how the encoded reports carry a node's devices: DeviceColumns "
                             "(what an agent sends a hub that announces them) or one Device "
                             "message each (older agents and hubs)")
    parser.add_argument("--wire-labels", choices=("sets", "maps"), default="sets",
                        help="how the encoded reports carry labels: once per distinct set "
                             "(label-sets, what an agent sends a hub that announces them) or "
                             "each node its whole map (older agents and hubs)")
    parser.add_argument("--default-gc", action="store_true",
                        help="keep CPython's collector thresholds instead of the hub's "
                             "(hub.heap.settle: freeze what is loaded, larger thresholds)")
    parser.add_argument("--no-freeze", action="store_true",
                        help="file each inventory with the collector only paused, left to it "
                             "after, instead of inside hub.heap.inventory as the agent channel "
                             "does (collected before, frozen after; the generated reports are "
                             "then frozen with generation, since in the hub they do not exist "
                             "before the ingest decodes them and its collection would walk "
                             "them)")
    parser.add_argument("--planning", action="store_true",
                        help="after the build, time a capacity sample and the planning copy a "
                             "cluster at a time and at once (alternated, twice each): the "
                             "event loop's longest stall and the CPU")
    parser.add_argument("--answers", action="store_true",
                        help="after the build, time the REST planning answers (report, n-1, "
                             "fit: the loop's longest stall, CPU, a digest of the answer)")
    parser.add_argument("--answer-tasks", type=int, default=0,
                        help="tasks placed (reserved) before --answers, as active tasks")
    parser.add_argument("--answer-rounds", type=int, default=2,
                        help="times each answer is timed (alternated)")
    parser.add_argument("--quick", action="store_true", help="CI size: 10 x 200")
    parser.add_argument("--json", action="store_true", help="print only a JSON summary")
    args = parser.parse_args(argv)
    if args.clusters < 1 or args.nodes < 1 or args.decisions < 0:
        parser.error("--clusters and --nodes must be at least 1, --decisions at least 0")
    if not 0 <= args.answer_tasks <= MAX_ANSWER_TASKS:
        parser.error(f"--answer-tasks must be from 0 to {MAX_ANSWER_TASKS:,}")
    if not 1 <= args.answer_rounds <= MAX_ANSWER_ROUNDS:
        parser.error(f"--answer-rounds must be from 1 to {MAX_ANSWER_ROUNDS}")
    if args.quick:
        args.clusters, args.nodes, args.decisions = 10, 200, 50
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
