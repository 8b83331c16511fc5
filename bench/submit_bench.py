"""REST batch submits into a real hub, in process: CPU per task, split by thread.

Starts a real hub as ``cycle_bench.py`` does (SQLite in a temporary home, background loops
stopped, the collector set as the hub server sets it), with no clusters (the tasks stay
Queued) and no REST rate limit (as the e2e bench runs it), and its REST app behind httpx's
in-process ASGI transport, then POSTs ``/api/v1/tasks:batch`` of ``--batch`` tasks until
``--tasks`` are stored, as the e2e bench's submitters do (the same task: 1 GPU, 30 s). What
one submit costs the hub: the request's parsing and validation, the task book, the store's
insert (its writer thread) and the views it answers with, without the sockets, the
placement loop or the members.

Measured per task: the event-loop thread's CPU (``time.thread_time``), the process's CPU
(the writer thread's commits included) and the wall time; the first ``--warm`` batches are
left out. ``--profile N`` runs the submits once more under cProfile and prints the top N
functions by own time. A/B against another tree: run this script with ``PYTHONPATH`` set to
that tree, back to back (``docs/benchmarks.md``, "REST submits in process").

    python bench/submit_bench.py                      # 10,000 tasks, batches of 200
    python bench/submit_bench.py --tasks 4000 --profile 25
    python bench/submit_bench.py --quick --json       # CI size, one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from cycle_bench import _hub  # beside this file
from flags import check_bounds  # beside this file

from hub.api.app import create_app

BOUNDS = {"tasks": (1, 100_000), "batch": (1, 1000), "warm": (0, 100), "profile": (0, 200)}
SPEC = {"gpu": 1, "duration": "30s"}


async def _run(args: argparse.Namespace, profiler: cProfile.Profile | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="submit-bench-") as tmp:
        home = Path(tmp) / "hub"
        # nothing can be placed; no REST rate limit (as the e2e bench runs the hub)
        hub = await _hub(home, nodes=0, cpus=1, clusters=0, api_rate_limit=0.0)
        try:
            token = (home / "admin.token").read_text().strip()
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(hub)),
                                         base_url="http://hub", headers=headers) as api:
                batches = [[{"name": f"t-{start + i}", **SPEC}
                            for i in range(min(args.batch, args.tasks - start))]
                           for start in range(0, args.tasks, args.batch)]
                measured = 0
                wall = thread = proc = 0.0
                for n, batch in enumerate(batches):
                    body = json.dumps({"tasks": batch}).encode()
                    started = (time.perf_counter(), time.thread_time(), time.process_time())
                    if profiler is not None and n >= args.warm:
                        profiler.enable()
                    resp = await api.post("/api/v1/tasks:batch", content=body)
                    if profiler is not None:
                        profiler.disable()
                    if resp.status_code != 201:
                        raise SystemExit(f"batch {n}: {resp.status_code} {resp.text[:300]}")
                    views = resp.json()
                    assert [v["name"] for v in views] == [t["name"] for t in batch]
                    if n >= args.warm:
                        measured += len(batch)
                        wall += time.perf_counter() - started[0]
                        thread += time.thread_time() - started[1]
                        proc += time.process_time() - started[2]
                stored = len(hub.tasks.queued())
        finally:
            await hub.stop()
    if stored != args.tasks:
        raise SystemExit(f"{stored} tasks queued, {args.tasks} submitted")
    per = 1e3 / max(measured, 1)
    return {"tasks": args.tasks, "batch": args.batch, "measured": measured,
            "loop_cpu_ms_per_task": round(thread * per, 4),
            "cpu_ms_per_task": round(proc * per, 4),
            "writer_cpu_ms_per_task": round((proc - thread) * per, 4),
            "wall_ms_per_task": round(wall * per, 4)}


def markdown(result: dict[str, Any]) -> str:
    """The figures as a markdown table."""
    rows = [("tasks stored", result["tasks"]), ("tasks per batch", result["batch"]),
            ("tasks measured", result["measured"]),
            ("event-loop CPU, ms a task", result["loop_cpu_ms_per_task"]),
            ("process CPU, ms a task", result["cpu_ms_per_task"]),
            ("of it other threads (the store writer), ms a task",
             result["writer_cpu_ms_per_task"]),
            ("wall, ms a task", result["wall_ms_per_task"])]
    return "\n".join(["| measure | value |", "|---|---|",
                      *(f"| {k} | {v} |" for k, v in rows)])


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=200, help="tasks per REST batch")
    parser.add_argument("--warm", type=int, default=5, help="first batches not measured")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="run once more under cProfile; print the top N by own time")
    parser.add_argument("--quick", action="store_true", help="CI size: 400 tasks")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.quick:
        args.tasks, args.batch, args.warm = 400, 100, 1
    if args.warm >= -(-args.tasks // args.batch):
        parser.error(f"--warm {args.warm} leaves none of the {-(-args.tasks // args.batch)} "
                     "batches measured")
    result = asyncio.run(_run(args, None))
    print(json.dumps(result) if args.json else markdown(result))
    if args.profile:
        profiler = cProfile.Profile()
        asyncio.run(_run(args, profiler))
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
