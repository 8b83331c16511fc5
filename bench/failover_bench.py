"""A lost member's Running tasks re-placed in process, the way a live hub does it: the
monitor's failover and the placement loop running together, timed from the eviction to
the last re-placement's commit.

``cycle_bench.py --scenario failover-running`` times the re-queue and then one cycle, each
alone; a live hub runs them as tasks of one event loop, with the store writer's commits in
a thread beside it, and may overlap them. This bench starts a real hub (SQLite in a
temporary home, the background loops stopped, no agents; the fleet set in its view as
``cycle_bench.py`` does: two clusters of ``--nodes`` cpu nodes), places N tasks on ``c0``,
reports them Running (``TaskBook.report``, as the agent channel does), marks ``c0``
NotReady, starts the placement loop and then calls ``Monitor.fail_over("c0")`` (the
eviction, one store write of every task, and its audit record), sends its commands and
pokes the loop, as ``Monitor.tick`` does. It waits until none of
the N tasks is Queued and the loop has nothing in flight (checked every ``POLL`` seconds).

Reported per run: the wall time from the eviction to every re-placement durable, when the
eviction returned, when the last task was Placed in memory (``staged_s``: the moment a live
hub stamps the Placed event ``faults.py`` times; its commit follows), the event loop
thread's CPU and the process's CPU over that window
(``time.thread_time`` / ``time.process_time``; the writer thread is in the second) and
``cpu_per_wall``: how much of the window the process spent on a CPU. Near 1, the failover
is bound by the interpreter's one running thread (the GIL), not by waiting on commits:
overlapping the writes with the decisions cannot shorten it, only less CPU can
(``docs/reliability.md``, "10,000 tasks in process, fifteenth session").

    python bench/failover_bench.py                       # 1,000 and 10,000 tasks
    python bench/failover_bench.py --tasks 10000 --repeat 3
    python bench/failover_bench.py --quick --json        # CI size, one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cycle_bench import _hub, _submit  # beside this file
from flags import bench_main, check_bounds  # beside this file

from fuyao.spec import ClusterState, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.activetask import ActiveTask
from hub.core import Hub
from hub.loops import send_all

POLL = 0.01   # seconds between checks that the failover is done (its resolution)


async def _running_on_c0(hub: Hub, tasks: int) -> None:
    """``tasks`` tasks placed on c0 and reported Running there; then c0 NotReady."""
    hub.fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0,
                             state=ClusterState.NOT_READY)
    await _submit(hub, "t", tasks)
    assert await hub.placement.cycle() == tasks, "the set-up cycle placed them all"
    for task in list(hub.tasks.active.values()):
        await hub.tasks.report("c0", pb.TaskReport(task_id=task.id, generation=task.generation,
                                                   phase=pb.TASK_PHASE_RUNNING, node="c0-0"))
    await hub.writer.apply()
    assert hub.tasks.active.states() == {TaskState.RUNNING: tasks}, "every task Running"
    for cluster, state in (("c0", ClusterState.NOT_READY), ("c1", ClusterState.READY)):
        hub.fleet.upsert_cluster(cluster, labels={}, weight=1, headroom=0.0, state=state)


def _stage_times(hub: Hub) -> list[float]:
    """A list the time of every ``TaskBook.stage`` call that placed tasks is appended to:
    its last is when the last task was Placed in memory, the moment a live hub stamps its
    Placed event (``faults.py``'s "last placed"); its commit and the PlaceTask follow."""
    times: list[float] = []
    stage = hub.tasks.stage

    def timed(placed: Any, *args: Any, **kwargs: Any) -> Any:
        staged = stage(placed, *args, **kwargs)
        if placed:
            times.append(time.perf_counter())
        return staged

    setattr(hub.tasks, "stage", timed)   # noqa: B010 - the instance's, shadowing the method
    return times


def _settled(hub: Hub, lost: list[ActiveTask]) -> bool:
    """No placement cycle deciding or waiting for its commit, and none of the lost cluster's
    tasks Queued (the re-queue's own write is done: ``fail_over`` returned after it).

    The tasks are looked at only while the loop is idle, and one by one: asking the hub's
    index (``ActiveTasks.states``, as this bench did until 2026-12-07) makes it refile every
    task changed since it was last asked - work a live hub does at its next cycle or
    ``/metrics`` scrape - so every poll put some of it inside the timed window (1-2% of a
    10,000-task failover)."""
    tail = hub.placement._tail
    if hub.placement.deciding() or (tail is not None and not tail.done()):
        return False
    return all(task.state != TaskState.QUEUED for task in lost)


async def _one(args: argparse.Namespace, tasks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        hub = await _hub(Path(tmp) / "hub", args.nodes, args.cpus)
        hub.monitor.evictor.rate = float(tasks)   # the whole outage in one batch
        loop: asyncio.Task[None] | None = None
        try:
            await _running_on_c0(hub, tasks)
            lost = hub.tasks.on_cluster("c0")
            staged = _stage_times(hub)
            loop = asyncio.create_task(hub.placement.run())
            await asyncio.sleep(0.1)      # the loop idle, waiting to be poked
            wall, thread, proc = time.perf_counter(), time.thread_time(), time.process_time()
            start = wall
            commands = await hub.monitor.fail_over("c0")
            send_all(hub.sessions, commands)
            hub.placement.poke()
            evicted = time.perf_counter() - wall
            while not _settled(hub, lost):
                await asyncio.sleep(POLL)
            wall, thread, proc = (time.perf_counter() - wall, time.thread_time() - thread,
                                  time.process_time() - proc)
            moved = sum(t.cluster == "c1" and t.state == TaskState.PLACED
                        for t in hub.tasks.active.values())
        finally:
            if loop is not None:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            await hub.stop()
    assert len(commands) == tasks and moved == tasks, (len(commands), moved)
    return {"tasks": tasks, "moved": moved, "wall_s": round(wall, 3),
            "evicted_s": round(evicted, 3), "staged_s": round(staged[-1] - start, 3),
            "loop_cpu_s": round(thread, 3),
            "cpu_s": round(proc, 3), "cpu_per_wall": round(proc / wall, 2),
            "cpu_ms_per_task": round(proc * 1e3 / tasks, 4)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every task count, ``--repeat`` times."""
    out: dict[str, Any] = {"clusters": 2, "nodes_per_cluster": args.nodes,
                           "load": os.getloadavg()[0], "python": sys.version.split()[0],
                           "poll_s": POLL, "runs": []}
    for tasks in args.tasks:
        for _ in range(args.repeat):
            out["runs"].append(asyncio.run(_one(args, tasks)))
    return out


def markdown(result: dict[str, Any]) -> str:
    """The runs as a table."""
    lines = [f"failover of c0's Running tasks to c1, 2 clusters x "
             f"{result['nodes_per_cluster']} nodes, load {result['load']:.1f}, "
             f"resolution {result['poll_s']} s", "",
             "| tasks | moved | eviction returned s | all Placed in memory s | "
             "all re-placed, durable s | loop CPU s | CPU s | CPU / wall | CPU ms/task |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['tasks']} | {r['moved']} | {r['evicted_s']} | {r['staged_s']} | "
              f"{r['wall_s']} | {r['loop_cpu_s']} | {r['cpu_s']} | {r['cpu_per_wall']} | "
              f"{r['cpu_ms_per_task']} |" for r in result["runs"]]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, action="append",
                   help="Running tasks on the lost cluster (repeatable; 1,000 and 10,000)")
    p.add_argument("--nodes", type=int, default=200, help="nodes per cluster")
    p.add_argument("--cpus", type=int, default=64, help="cpus per node (tasks ask 0.5)")
    p.add_argument("--repeat", type=int, default=1, help="runs per task count")
    p.add_argument("--quick", action="store_true", help="CI size: 200 tasks, 20 nodes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    check_bounds(p, args, {"nodes": (1, 10_000), "cpus": (1, 1024), "repeat": (1, 100)})
    if args.quick:
        args.tasks, args.nodes = args.tasks or [200], 20
    args.tasks = args.tasks or [1000, 10000]
    most = min(100_000, args.nodes * args.cpus * 2)   # tasks of 0.5 cpu that fit on c1
    if any(not 1 <= n <= most for n in args.tasks):
        p.error(f"--tasks must be from 1 to {most} (what fits on one cluster of --nodes "
                "x --cpus, 0.5 cpu a task)")
    return args


def main(argv: list[str] | None = None, emit: Callable[[str], None] = print) -> int:
    """Run and print (markdown, or JSON with ``--json``)."""
    return bench_main(parse, run, markdown, argv, emit)


if __name__ == "__main__":
    sys.exit(main())
