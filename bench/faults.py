"""Fault-injection benchmark: every fault at a larger size, a markdown table, JSON.

Drives real hub and agent processes (``faultkit``) through each fault with a stream of
tasks flowing, then audits every task (finished exactly once, running exactly once, queued
with a reason; lost and run-twice from the members' copy logs). Then measures the
failover time of a cluster carrying ``--failover-tasks`` tasks (1,000 by default): from
the moment its agent is killed to every one of its tasks placed elsewhere (and running
there), from the hub's own event times, against the configured grace (the larger of
NotReady + eviction timeout and lease + margin), so the figure that matters is the time
*over* the grace. Exits 1 if anything was lost or ran twice, or a fault's check failed.

    python bench/faults.py                               # every fault, failover of 1,000
    python bench/faults.py --failover-tasks 1000 --failover-tasks 10000
    python bench/faults.py --quick --json                # CI size, one JSON object
    python bench/faults.py --only 2 --only 5b            # some faults
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests.support: the servers

import faultkit
import httpx

from fuyaoctl.client import Client


def failover_run(home: Path, tasks: int, rate: float | None = None) -> dict[str, Any]:
    """Fault 2 with ``tasks`` long tasks on the lost cluster (the other has room)."""
    # A burst of 1,000 reports keeps a loaded hub seconds behind its agents: the lease must
    # outlast that lag (docs/reliability.md), so this run uses 15 s + 3 s (30 s + 3 s for
    # more than 2,000 tasks). The rate limit (at least 2,000/s, twice the tasks) lets the
    # bucket, full when the outage starts, move them all in the first monitor tick.
    # Above 2,000 tasks the start-up burst alone kept a loaded hub's heartbeat answers more
    # than 3 s behind: the cluster then flapped NotReady before the kill. So the large run
    # also gives health more time (10 s / 15 s); the grace is still lease + margin.
    rate = rate or max(2000.0, 2.0 * tasks)
    large = tasks > 2000
    timing = faultkit.Timing(member_lease=30.0 if large else 15.0, failover_margin=3.0,
                             eviction_rate=rate, unknown_after=10.0 if large else 2.0,
                             not_ready_after=15.0 if large else 3.0)
    nodes = max(4, tasks // 50)
    scenario = faultkit.Scenario(home, clusters=2, nodes=nodes, timing=timing)
    try:
        scenario.start()
        # A patient client: 10,000 submissions on a loaded 2-core machine take a while.
        with Client(scenario.stack.url, token=scenario.stack.token, timeout=300.0) as client:
            client.cordon("c1")        # everything lands on c0 first
            for start in range(0, tasks, 250):
                client.submit_tasks([{"name": f"f-{i}", "cpu": "100m", "memory": "64Mi"}
                                     for i in range(start, min(tasks, start + 250))])
            # Counted from /metrics (the hub's gauges), not by listing 10,000 tasks a second.
            faultkit.wait_until(lambda: running_count(scenario) == tasks, timeout=900, step=1.0)
            client.uncordon("c1")
        stream = faultkit.TaskStream([scenario.stack.url], batch=0, every=1, durations=(1,))
        figures = faultkit.agent_kill_for_good(scenario, stream)
        with scenario.client() as client:
            elsewhere = [v for v in client.list_tasks() if v.cluster == "c1"]
        copies = faultkit.read_copies([scenario.stack.copy_log(n) for n in scenario.names])
        twice = sum(faultkit.overlaps(c) for c in copies.values())
    finally:
        scenario.close()
    checks = {**figures.pop("checks", {}), "all running elsewhere": len(elsewhere) == tasks}
    return {"fault": f"2 failover of {tasks} tasks", **figures, "tasks": tasks,
            "running_once": len(elsewhere), "run_twice": twice, "eviction_rate": rate,
            "nodes_per_cluster": nodes, "checks": checks}


def running_count(scenario: faultkit.Scenario) -> int:
    """Running tasks, from the hub's ``fuyao_tasks{state="Running"}`` gauge."""
    text = httpx.get(f"http://127.0.0.1:{scenario.stack.health_port}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith('fuyao_tasks{') and 'state="Running"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


NOTES = ("failover_s", "over_grace_s", "running_s", "running_over_grace_s", "grace_s",
         "eviction_rate", "nodes_per_cluster", "took_over_s", "epoch", "writes_refused",
         "writes_back_s", "placed_during", "caught_up_s", "watcher_resumed_s", "down_s",
         "drops", "frozen_s", "cut_off_s", "not_ready_samples", "running_at_kill", "adopted",
         "seconds", "timeline", "stages_mean_ms", "error")


def failed_checks(row: dict[str, Any]) -> list[str]:
    """The names of a fault's checks that did not hold."""
    return [name for name, ok in row.get("checks", {}).items() if not ok]


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table."""
    lines = ["| fault | tasks | finished once | running once | queued (reason) | "
             "finished twice (in turn) | lost | run twice (at once) | checks | notes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        notes = ", ".join(f"{k} {r[k]}" for k in NOTES if k in r)
        checks = r.get("checks", {})
        verdict = ("" if not checks else f"{len(checks)} ok" if not failed_checks(r)
                   else "FAILED: " + "; ".join(failed_checks(r)))
        lines.append(f"| {r['fault']} | {r.get('tasks', r.get('moved', ''))} | "
                     f"{r.get('finished_once', '')} | {r.get('running_once', '')} | "
                     f"{r.get('queued_with_reason', '')} | {r.get('finished_twice', '')} | "
                     f"{r.get('lost', '')} | {r.get('run_twice', '')} | {verdict} | {notes} |")
    return "\n".join(lines)


def guarded(name: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One row; a run that crashed is a row too (a failed check), so the rest still run."""
    try:
        row = run()
    except Exception as exc:           # a harness failure: report it, go on
        row = {"fault": name, "error": repr(exc)[:300], "checks": {"ran to the end": False}}
    print(f"{name}: {row}", file=sys.stderr, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--only", action="append", default=[],
                        help="fault number(s) to run, e.g. 2 or 5b")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per fault")
    parser.add_argument("--failover-tasks", type=int, action="append", default=[],
                        help="tasks on the lost cluster of a failover run (repeatable)")
    parser.add_argument("--redis-down", type=float, default=None,
                        help="seconds fault 9 keeps Redis down (30; --quick: 5)")
    args = parser.parse_args()
    tasks = args.tasks or (30 if args.quick else 200)
    failover_tasks = args.failover_tasks or [100 if args.quick else 1000]
    redis_down = args.redis_down or (5.0 if args.quick else 30.0)
    chosen = [f for f in faultkit.FAULTS if not args.only or f.split()[0] in args.only]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fuyao-faults-") as tmp:
        for i, fault in enumerate(chosen):
            rows.append(guarded(fault, partial(
                faultkit.run_fault, fault, Path(tmp) / f"f{i}", tasks=tasks,
                batch=max(3, tasks // 40), every=0.3, nodes=4 if args.quick else 8,
                redis_down_s=redis_down)))
        if not args.only or "2" in args.only:
            for n in failover_tasks:
                rows.append(guarded(f"2 failover of {n} tasks",
                                    partial(failover_run, Path(tmp) / f"failover-{n}", n)))
    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.node()} {platform.machine()} {platform.processor()}",
              "command": " ".join(["python", "bench/faults.py", *sys.argv[1:]]),
              "rows": rows, "lost": sum(r.get("lost", 0) for r in rows),
              "run_twice": sum(r.get("run_twice", 0) for r in rows),
              "failed_checks": {r["fault"]: failed_checks(r) for r in rows if failed_checks(r)}}
    out = Path(tempfile.gettempdir()) / f"fuyao-faults-{int(time.time())}.json"
    out.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result))
    else:
        print(table(rows))
        print(f"\n{result['date']}, {result['machine']}: `{result['command']}`; JSON: {out}")
    ok = result["lost"] == 0 and result["run_twice"] == 0 and not result["failed_checks"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
