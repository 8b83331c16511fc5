"""One hub placement cycle over N queued tasks, in process: CPU per task and where it goes.

Starts a real hub (SQLite in a temporary home, background loops stopped, no agents: the
fleet is set directly in its view, as ``tests/queueing`` does) with two clusters of
``--nodes`` cpu nodes each, then, per task count:

- ``failover`` (default): N tasks are placed on ``c0`` by one cycle, ``c0`` is lost (NotReady,
  its tasks re-queued for failover in one write, as the monitor does) and the cycle that
  re-places all N on ``c1`` is measured: the hub's side of "a lost member's tasks re-placed".
- ``failover-running``: as ``failover``, but the N tasks are reported Running on ``c0``
  first (through ``TaskBook.report``, the call the agent channel makes for each report: the
  hub's holds handed to the member's own accounting), as a live outage's tasks are
  (``bench/faults.py --failover-tasks``).
- ``queued``: N freshly submitted tasks, ``c0`` only (the cycle of docs/reliability.md);
  with ``--clusters K`` (K > 2) every cluster but ``c1`` takes them, so each decision
  judges and scores K - 1 clusters and each placement stores K - 1 clusters' scores (up to
  20): the hub's side of a placement in a fleet of many members, without agents; with
  ``--gpus G`` the nodes have G GPUs each and the tasks ask one GPU, as the e2e bench's do
  (a GPU's hold is planned device by device: ``Scheduler.reserve`` costs more).

Measured: the cycle's wall time, the event-loop thread's CPU (``time.thread_time``) and the
process's CPU (the SQLite writer thread's commits included), per task, and the cyclic
collector's CPU within it (``gc.callbacks``: seconds, and how many full collections); then
one more cycle with a single new task and N active, and one more (the per-cycle cost that
grows with active tasks: the first cycle after also charges the N newly admitted tasks to
their queue); and, with the N tasks placed and their commit done, what they keep in the
collector's view: containers it tracks a task (``tracked_per_task``, after the collections
that let go of what they can) and a full collection's wall time (``full_collection_ms``):
every full pass walks them while every stage of every task waits. The collector is set as
the hub server sets it (``hub.heap.settle``); ``--collector default`` keeps CPython's
thresholds, as the passes before 2026-12-02 21:00 did: at 10,000 tasks those set off 2-3
full collections in the cycle, 0.4-0.6 s of it. ``--profile`` runs the measured cycle again
on a fresh hub under cProfile and splits its self time by part (engine, staging, queueing,
store, other) with the top functions.

A/B against another tree (e.g. main exported to /tmp/x): run this same script with
``PYTHONPATH=/tmp/x`` (its ``hub`` then shadows the editable install), back to back.

    python bench/cycle_bench.py                       # 1,000 and 10,000 tasks
    python bench/cycle_bench.py --tasks 10000 --profile 25
    python bench/cycle_bench.py --scenario failover-running --tasks 10000
    python bench/cycle_bench.py --scenario queued --clusters 101 --nodes 20 --tasks 5000
    python bench/cycle_bench.py --scenario queued --clusters 101 --nodes 20 --gpus 8 --tasks 5000
    python bench/cycle_bench.py --quick --json        # CI size, one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import os
import pstats
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flags import bench_main, check_bounds  # beside this file

from fuyao.inventory import NodeInfo, ResourceAmounts
from fuyao.nodebuild import build_node
from fuyao.spec import ClusterState, TaskSpec, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub import heap
from hub.config import HubConfig, Timings
from hub.core import Hub

# Where a function's self time is counted (first match of its file path wins).
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("idle", ("select.epoll",)),
    ("engine", ("hub/placement/", "hub/fleet/")),
    ("queueing", ("hub/queueing/",)),
    ("staging", ("hub/taskbook.py", "hub/activetask.py", "fuyao/", "protobuf", "pydantic")),
    ("store", ("hub/store/", "hub/writer.py", "sqlalchemy", "sqlite")),
    ("loop", ("hub/loops.py", "asyncio")),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


GPU_PRODUCT = "NVIDIA-A100-SXM4-80GB"   # --gpus: every node's devices (the e2e fleet's kind)


def _node(name: str, cpus: int, gpus: int = 0) -> NodeInfo:
    """A node of ``cpus`` cpus; with ``gpus``, built as a member reports one with that many
    GPUs (``fuyao.nodebuild.build_node``, the sim and kube backends' own)."""
    if gpus:
        return build_node(name, {"kubernetes.io/arch": "amd64",
                                 "nvidia.com/gpu.product": GPU_PRODUCT},
                          {"cpu": str(cpus), "memory": f"{cpus * 4}Gi", "pods": "1000",
                           "nvidia.com/gpu": str(gpus)})
    res = ResourceAmounts(cpu_milli=cpus * 1000, memory_mib=cpus * 4096, pods=1000)
    return NodeInfo(name=name, labels={"kubernetes.io/arch": "amd64"}, allocatable=res,
                    free=res)


async def _hub(home: Path, nodes: int, cpus: int, collector: str = "hub",
               clusters: int = 2, gpus: int = 0, **config: Any) -> Hub:
    """A started hub, loops stopped, ``clusters`` clusters (c0, c1, ...) of ``nodes`` nodes
    each (``gpus`` GPUs a node if given); with
    ``collector`` "hub" the collector set as ``hub.server`` sets it once started
    (``hub.heap.settle``: what exists frozen, larger thresholds), else CPython's defaults.
    ``config``: more ``HubConfig`` fields."""
    timings = Timings(placement_interval=3600.0, monitor_interval=3600.0)
    hub = Hub(HubConfig(home=home, agent_port=_free_port(), register_port=_free_port(),
                        agent_tls=False, timings=timings, **config))
    home.mkdir(parents=True, exist_ok=True)
    await hub.start()
    if collector == "hub":
        heap.settle()
    for loop in hub._loops:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    for cluster in (f"c{i}" for i in range(clusters)):
        hub.fleet.upsert_cluster(cluster, labels={}, weight=1, headroom=0.0,
                                 state=ClusterState.READY)
        hub.fleet.replace_nodes(cluster, [_node(f"{cluster}-{i}", cpus, gpus)
                                          for i in range(nodes)])
    return hub


async def _submit(hub: Hub, prefix: str, count: int, gpu: bool = False) -> None:
    """``count`` tasks of half a cpu (or, with ``gpu``, of one GPU) submitted as REST would."""
    specs = [TaskSpec(name=f"{prefix}-{i}", gpu=1) if gpu else
             TaskSpec(name=f"{prefix}-{i}", cpu="500m", memory="1Gi") for i in range(count)]
    for start in range(0, count, 2000):
        await hub.tasks.submit(specs[start:start + 2000])


async def _prepare(hub: Hub, scenario: str, tasks: int,
                   profiler: cProfile.Profile | None = None,
                   gpu: bool = False) -> dict[str, float]:
    """Leave ``tasks`` tasks queued for the measured cycle (``gpu``: of one GPU each, the
    queued scenario only). In ``failover``, the re-queue of the lost cluster's tasks is
    timed as well (wall, event-loop thread CPU, process CPU: the writer thread's commit
    included) and profiled with ``profiler``, if given."""
    if scenario == "queued":
        hub.fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0,
                                 state=ClusterState.NOT_READY)
        await _submit(hub, "t", tasks, gpu)
        return {}
    hub.fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0,
                             state=ClusterState.NOT_READY)
    await _submit(hub, "t", tasks)
    assert await hub.placement.cycle() == tasks, "the set-up cycle placed them all"
    if scenario == "failover-running":
        for task in list(hub.tasks.active.values()):
            await hub.tasks.report("c0", pb.TaskReport(task_id=task.id,
                                                       generation=task.generation,
                                                       phase=pb.TASK_PHASE_RUNNING,
                                                       node="c0-0"))
        await hub.writer.apply()     # the reports' writes, durable before the loss
        assert len(hub.tasks.active.states()) == 1, "every task reported Running"
    for cluster, state in (("c0", ClusterState.NOT_READY), ("c1", ClusterState.READY)):
        hub.fleet.upsert_cluster(cluster, labels={}, weight=1, headroom=0.0, state=state)
    wall, thread, proc = time.perf_counter(), time.thread_time(), time.process_time()
    if profiler is not None:
        profiler.enable()
    try:
        await hub.tasks.requeue_cluster("c0", "c0 lost (bench)")
    finally:
        if profiler is not None:
            profiler.disable()
    return {"requeue_wall_s": time.perf_counter() - wall,
            "requeue_loop_cpu_s": time.thread_time() - thread,
            "requeue_cpu_s": time.process_time() - proc}


class _Collections:
    """CPU the cyclic collector takes (any thread's collections), while counting."""

    def __init__(self) -> None:
        self.seconds, self.full, self._at = 0.0, 0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._at = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._at
            self.full += info["generation"] == 2


async def _timed(hub: Hub, profiler: cProfile.Profile | None = None) -> dict[str, float]:
    """Run one placement cycle; its wall time and CPU (and the collector's part of it)."""
    collections = _Collections()
    gc.callbacks.append(collections)
    wall, thread, proc = time.perf_counter(), time.thread_time(), time.process_time()
    if profiler is not None:
        profiler.enable()
    try:
        placed = await hub.placement.cycle()
    finally:
        if profiler is not None:
            profiler.disable()
        gc.callbacks.remove(collections)
    return {"placed": placed, "wall_s": time.perf_counter() - wall,
            "loop_cpu_s": time.thread_time() - thread, "cpu_s": time.process_time() - proc,
            "slices": hub.placement.last_slices, "gc_s": collections.seconds,
            "gc_full": collections.full}


def _held_by_collector() -> tuple[int, float]:
    """Containers the cyclic collector tracks (after the collections that let go of what
    they can: a tuple of tuples takes one a level) and a full collection's wall time then
    (median of three): what every full pass, and each younger one a task passes through,
    walks while every stage of every task waits."""
    for _ in range(3):
        gc.collect()
    tracked = len(gc.get_objects())
    times = []
    for _ in range(3):
        start = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - start)
    return tracked, statistics.median(times)


async def _one(args: argparse.Namespace, tasks: int,
               profiler: cProfile.Profile | None = None,
               requeue_profiler: cProfile.Profile | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cycle-bench-") as tmp:
        hub = await _hub(Path(tmp) / "hub", args.nodes, args.cpus, args.collector,
                         args.clusters, args.gpus)
        try:
            before, _ = _held_by_collector()
            requeue = await _prepare(hub, args.scenario, tasks, requeue_profiler,
                                     args.gpus > 0)
            queued = len(hub.tasks.queued())
            cycle = await _timed(hub, profiler)
            assert cycle["placed"] == queued == tasks, (cycle, queued)
            await hub.writer.apply()    # the cycle's commit done: what a placed task keeps
            tracked, full = _held_by_collector()
            running = sum(t.state == TaskState.PLACED for t in hub.tasks.active.values())
            spread = len({t.cluster for t in hub.tasks.active.values()})
            after = []
            for name in ("next", "later"):   # the first sees N newly admitted, then none
                await _submit(hub, name, 1, args.gpus > 0)
                after.append(await _timed(hub))
            held = sum(r.requests.gpu_milli * len(r.nodes)
                       for r in map(hub.fleet.reservation, hub.tasks.active) if r is not None)
        finally:
            await hub.stop()
    per = 1e3 / tasks
    return {"tasks": tasks, "placed": int(cycle["placed"]), "active_after": running,
            "clusters_used": spread,
            "slices": int(cycle["slices"]), "wall_s": round(cycle["wall_s"], 3),
            "loop_cpu_s": round(cycle["loop_cpu_s"], 3), "cpu_s": round(cycle["cpu_s"], 3),
            "loop_cpu_ms_per_task": round(cycle["loop_cpu_s"] * per, 4),
            "cpu_ms_per_task": round(cycle["cpu_s"] * per, 4),
            "gc_s": round(cycle["gc_s"], 3), "gc_full": int(cycle["gc_full"]),
            "next_cycle_loop_cpu_ms": round(after[0]["loop_cpu_s"] * 1e3, 2),
            "later_cycle_loop_cpu_ms": round(after[1]["loop_cpu_s"] * 1e3, 2),
            "gpus_held": held // 1000,
            "tracked_per_task": round((tracked - before) / tasks, 1),
            "full_collection_ms": round(full * 1e3, 1),
            **{k: round(v, 3) for k, v in requeue.items()}}


def _part(filename: str, func: str) -> str:
    path = f"{filename.replace(os.sep, '/')}:{func}"
    for part, needles in PARTS:
        if any(n in path for n in needles):
            return part
    return "other"


def breakdown(stats: pstats.Stats, top: int) -> dict[str, Any]:
    """Self time per part (fractions of the profiled total) and the top functions."""
    raw: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    parts: dict[str, float] = {}
    rows: list[tuple[float, float, str]] = []
    for (filename, line, func), (_, _, self_s, cum_s, _) in raw.items():
        part = _part(filename, func)
        parts[part] = parts.get(part, 0.0) + self_s
        short = "/".join(filename.replace(os.sep, "/").split("/")[-2:])
        rows.append((self_s, cum_s, f"{short}:{line}({func})"))
    total = sum(parts.values()) or 1.0
    rows.sort(reverse=True)
    return {"profiled_s": round(total, 3),
            "parts": {k: round(v / total, 3) for k, v in sorted(parts.items(),
                                                                 key=lambda kv: -kv[1])},
            "top_self": [{"func": f, "self_s": round(s, 4), "cum_s": round(c, 4)}
                         for s, c, f in rows[:top]]}


def cumulative(stats: pstats.Stats, names: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """Cumulative time of named functions (``label -> ("file_suffix:func", ...)``, any of
    them: the compiled engine's methods are cProfile's built-ins, file ``~``) as fractions."""
    raw: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values()) or 1.0
    out: dict[str, float] = {}
    for label, wanted in names.items():
        cum = 0.0
        for one in wanted:
            suffix, func = one.rsplit(":", 1)
            cum += sum(v[3] for (f, _, fn), v in raw.items()
                       if fn == func and f.replace(os.sep, "/").endswith(suffix))
        out[label] = round(cum / total, 3)
    return out


# The pieces of the cycle the brief names, by cumulative time.
PIECES = {
    "schedule": ("hub/placement/memshare.py:schedule",),
    "reserve": ("hub/placement/scheduler.py:reserve",
                "~:<method 'reserve' of 'Scheduler' objects>"),   # from source, compiled
    "stage": ("hub/taskbook.py:stage",),
    "score_records": ("hub/scorerows.py:_records",),
    "workload_of": ("hub/activetask.py:workload_fields",),
    "cycle.request": ("hub/queueing/cycle.py:request",),
    "cycle.placed": ("hub/queueing/cycle.py:placed",),
    "begin": ("hub/queueing/queueing.py:begin",),
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every task count, then the profile if asked."""
    out: dict[str, Any] = {"scenario": args.scenario, "clusters": args.clusters,
                           "nodes_per_cluster": args.nodes, "gpus_per_node": args.gpus,
                           "load": os.getloadavg()[0], "python": sys.version.split()[0],
                           "collector": args.collector,
                           "runs": []}
    for tasks in args.tasks:
        for _ in range(args.repeat):
            out["runs"].append(asyncio.run(_one(args, tasks)))
    if args.profile:
        profiler, requeue = cProfile.Profile(), cProfile.Profile()
        asyncio.run(_one(args, args.tasks[-1], profiler,
                         requeue if args.scenario != "queued" else None))
        stats = pstats.Stats(profiler)
        out["profile"] = {"tasks": args.tasks[-1], **breakdown(stats, args.profile),
                          "pieces": cumulative(stats, PIECES)}
        if args.scenario != "queued":
            out["requeue_profile"] = breakdown(pstats.Stats(requeue), args.profile)
    return out


def markdown(result: dict[str, Any]) -> str:
    """The runs as a table, then the profile."""
    gpus = result.get("gpus_per_node")
    kind = f" of {gpus} GPUs (tasks of one GPU)" if gpus else ""
    lines = [f"scenario {result['scenario']}, {result['clusters']} clusters x "
             f"{result['nodes_per_cluster']} "
             f"nodes{kind}, collector {result['collector']}, load {result['load']:.1f}", "",
             "| tasks | slices | wall s | loop CPU s | CPU s | loop CPU ms/task | "
             "CPU ms/task | collector s (full) | next cycle (1 task) loop CPU ms | a later one | "
             "re-queue wall s | re-queue loop CPU s | re-queue CPU s | "
             "tracked containers a task | full collection ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['tasks']} | {r['slices']} | {r['wall_s']} | {r['loop_cpu_s']} | "
                     f"{r['cpu_s']} | {r['loop_cpu_ms_per_task']} | {r['cpu_ms_per_task']} | "
                     f"{r['gc_s']} ({r['gc_full']}) | "
                     f"{r['next_cycle_loop_cpu_ms']} | {r['later_cycle_loop_cpu_ms']} | "
                     f"{r.get('requeue_wall_s', '')} | {r.get('requeue_loop_cpu_s', '')} | "
                     f"{r.get('requeue_cpu_s', '')} | {r['tracked_per_task']} | "
                     f"{r['full_collection_ms']} |")
    prof = result.get("profile")
    if prof:
        lines += ["", f"profile of {prof['tasks']} tasks ({prof['profiled_s']} s self time):",
                  "parts: " + ", ".join(f"{k} {v:.0%}" for k, v in prof["parts"].items()),
                  "pieces (cumulative): " + ", ".join(f"{k} {v:.0%}"
                                                      for k, v in prof["pieces"].items()), ""]
        lines += [f"  {row['self_s']:8.4f} {row['cum_s']:8.4f}  {row['func']}"
                  for row in prof["top_self"]]
    requeue = result.get("requeue_profile")
    if requeue:
        lines += ["", f"profile of the re-queue ({requeue['profiled_s']} s self time, "
                  "the event loop's thread only):"]
        lines += [f"  {row['self_s']:8.4f} {row['cum_s']:8.4f}  {row['func']}"
                  for row in requeue["top_self"]]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, action="append",
                   help="queued tasks in the measured cycle (repeatable; 1,000 and 10,000)")
    p.add_argument("--scenario", choices=("failover", "failover-running", "queued"),
                   default="failover")
    p.add_argument("--clusters", type=int, default=2,
                   help="clusters in the fleet (more than 2: the queued scenario only)")
    p.add_argument("--nodes", type=int, default=200, help="nodes per cluster")
    p.add_argument("--cpus", type=int, default=64, help="cpus per node (tasks ask 0.5)")
    p.add_argument("--gpus", type=int, default=0,
                   help="GPUs per node; the tasks then ask one GPU each, as the e2e bench's "
                        "do (the queued scenario only)")
    p.add_argument("--collector", choices=("hub", "default"), default="hub",
                   help="the cyclic collector as the hub server sets it (hub.heap.settle), "
                        "or CPython's default thresholds (the passes before 2026-12-02 21:00)")
    p.add_argument("--repeat", type=int, default=1, help="runs per task count")
    p.add_argument("--profile", type=int, default=0, metavar="TOP",
                   help="profile the last task count once more, show TOP functions")
    p.add_argument("--quick", action="store_true", help="CI size: 200 tasks, 20 nodes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    check_bounds(p, args, {"clusters": (2, 1_000), "nodes": (1, 10_000), "cpus": (1, 1024),
                           "gpus": (0, 16), "repeat": (1, 100), "profile": (0, 200)})
    if args.clusters > 2 and args.scenario != "queued":
        p.error("--clusters above 2 needs --scenario queued (failover moves c0's tasks to c1)")
    if args.gpus and args.scenario != "queued":
        p.error("--gpus needs --scenario queued")
    if any(not 1 <= n <= 100_000 for n in args.tasks or []):
        p.error("--tasks must be from 1 to 100000")
    if args.quick:
        args.tasks, args.nodes, args.profile = args.tasks or [200], 20, args.profile or 5
    args.tasks = args.tasks or [1000, 10000]
    return args


def main(argv: list[str] | None = None, emit: Callable[[str], None] = print) -> int:
    """Run and print (markdown, or JSON with ``--json``)."""
    return bench_main(parse, run, markdown, argv, emit)


if __name__ == "__main__":
    sys.exit(main())
