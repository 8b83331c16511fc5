"""A submit and the placement cycle after it, with a backlog of queued tasks: does their
cost grow with the backlog?

GPU fleets run over-subscribed: tens of thousands of tasks may wait for room. Starts a real
hub in process (SQLite in a temporary home, loops stopped, two clusters of cpu nodes set in
its view, as ``cycle_bench.py`` does), queues ``--backlog`` tasks no node can take (64 cpus
each on 16-cpu nodes), then, ``--rounds`` times: submits ``--batch`` more through
``Hub.submit`` (what ``POST /api/v1/tasks:batch`` runs: checks, the store write, and the
views it answers with, each with its queue position), runs one placement cycle, and times
on their own ``TaskBook.lanes()`` (each queue's tasks in order, taken by every cycle; the
parked ones left out), ``TaskBook.queued()`` (the order across queues: planning, explain)
and the queue positions (``hub.queueing.views.positions_now``, asked by a submit's views).
The backlog's tasks can never run, so since the ninth session they are parked after the
first cycle (``hub.queueing.parking``): the cycle after a submit decides its 200 tasks once
each (they no longer hold their queue) and never again. Reported per
backlog size: the medians of the event loop's thread CPU (``time.thread_time``; the store
writer's thread is not in it).

A/B against another tree: run this same file with ``PYTHONPATH=<tree>``, back to back.

    python bench/backlog_bench.py                          # backlogs 0, 10,000, 25,000
    python bench/backlog_bench.py --backlog 50000 --json
    python bench/backlog_bench.py --quick --json           # CI size
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cycle_bench import _hub  # beside this file
from flags import check_bounds

from fuyao.spec import TaskSpec
from hub.queueing.views import positions_now


def _ms(fn: Callable[[], object]) -> float:
    start = time.thread_time()
    fn()
    return (time.thread_time() - start) * 1e3


async def _one(args: argparse.Namespace, backlog: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="backlog-bench-") as tmp:
        hub = await _hub(Path(tmp) / "hub", args.nodes, 16)
        try:
            waiting = [TaskSpec(name=f"b-{i}", cpu="64") for i in range(backlog)]
            for start in range(0, backlog, 2000):
                await hub.tasks.submit(waiting[start:start + 2000])
            await hub.placement.cycle()     # the backlog's misses, as a running hub has them
            rows: list[tuple[float, float, float, float]] = []
            for r in range(args.rounds):
                specs = [TaskSpec(name=f"n{r}-{i}", cpu="64") for i in range(args.batch)]
                start = time.thread_time()
                views = await hub.submit(specs)
                submitted = time.thread_time()
                await hub.placement.cycle()
                cycled = time.thread_time()
                assert all(v.queue_position for v in views), "every view has its position"
                rows.append(((submitted - start) * 1e3, (cycled - submitted) * 1e3,
                             _ms(hub.tasks.lanes), _ms(hub.tasks.queued),
                             _ms(lambda: positions_now(hub.queueing))))
            queued = len(hub.tasks.queued())
        finally:
            await hub.stop()
    assert queued == backlog + args.rounds * args.batch, "nothing was placed or lost"
    submit, cycle, lanes, order, positions = (statistics.median(c)
                                              for c in zip(*rows, strict=True))
    return {"backlog": backlog, "submit_ms": round(submit, 2),
            "submit_us_per_task": round(submit * 1e3 / args.batch, 1),
            "cycle_ms": round(cycle, 2), "lanes_ms": round(lanes, 3),
            "queued_ms": round(order, 3),
            "positions_ms": round(positions, 3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every backlog size, one fresh hub each."""
    return {"batch": args.batch, "rounds": args.rounds, "nodes_per_cluster": args.nodes,
            "load": os.getloadavg()[0], "python": sys.version.split()[0],
            "runs": [asyncio.run(_one(args, b)) for b in args.backlog]}


def markdown(result: dict[str, Any]) -> str:
    """The runs as a table."""
    lines = [f"{result['batch']}-task submits, medians of {result['rounds']} rounds, "
             f"load {result['load']:.1f} (event-loop thread CPU)", "",
             "| backlog | submit ms | submit us/task | cycle after it ms | lanes() ms | "
             "queued() ms | queue positions ms |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['backlog']:,} | {r['submit_ms']} | {r['submit_us_per_task']} | "
              f"{r['cycle_ms']} | {r['lanes_ms']} | {r['queued_ms']} | {r['positions_ms']} |"
              for r in result["runs"]]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backlog", type=int, action="append",
                   help="tasks queued before the rounds (repeatable; 0, 10,000 and 25,000)")
    p.add_argument("--batch", type=int, default=200, help="tasks a submit brings")
    p.add_argument("--rounds", type=int, default=5, help="submits measured per backlog")
    p.add_argument("--nodes", type=int, default=50, help="nodes per cluster")
    p.add_argument("--quick", action="store_true", help="CI size: backlogs 0 and 500")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    check_bounds(p, args, {"batch": (1, 5000), "rounds": (1, 100), "nodes": (1, 10_000)})
    if any(not 0 <= n <= 200_000 for n in args.backlog or []):
        p.error("--backlog must be from 0 to 200000")
    if args.quick:
        args.backlog, args.rounds, args.batch = args.backlog or [0, 500], 3, 50
    args.backlog = args.backlog or [0, 10_000, 25_000]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run, then print the table (or the JSON object with ``--json``)."""
    args = parse(argv)
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
