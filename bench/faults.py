"""Fault-injection benchmark: every fault at a larger size, a markdown table, JSON.

Drives real hub and agent processes (``faultkit``) through each fault with a stream of
tasks flowing, then audits every task (finished exactly once, running exactly once, queued
with a reason; lost and run-twice from the members' copy logs). Then measures the
failover time of a cluster carrying ``--failover-tasks`` tasks (1,000 by default): from
the moment its agent is killed to every one of its tasks placed elsewhere, against the
configured grace (the larger of NotReady + eviction timeout and lease + margin), so the
figure that matters is the time *over* the grace.

    python bench/faults.py                      # full run, table on stdout
    python bench/faults.py --quick --json       # CI size, one JSON object
    python bench/faults.py --only 2 --only 5b   # some faults
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faultkit


def failover_run(home: Path, tasks: int) -> dict[str, Any]:
    """Fault 2 with ``tasks`` long tasks on the lost cluster (the other has room)."""
    # A burst of 1,000 reports keeps a loaded hub seconds behind its agents: the lease must
    # outlast that lag (docs/reliability.md), so this run uses 15 s + 3 s.
    timing = faultkit.Timing(member_lease=15.0, failover_margin=3.0)
    scenario = faultkit.Scenario(home, clusters=2, nodes=max(4, tasks // 50),
                                 timing=timing)
    try:
        scenario.start()
        with scenario.client() as client:
            client.cordon("c1")        # everything lands on c0 first
            for start in range(0, tasks, 500):
                client.submit_tasks([{"name": f"f-{i}", "cpu": "100m", "memory": "64Mi"}
                                     for i in range(start, min(tasks, start + 500))])
            faultkit.wait_until(lambda: len(client.list_tasks(state="Running")) == tasks,
                                timeout=300, step=0.5)
            client.uncordon("c1")
        stream = faultkit.TaskStream(scenario.stack.url, batch=0, every=1, durations=(1,))
        figures = faultkit.agent_kill_for_good(scenario, stream)
        scenario.wait_settled()
        with scenario.client() as client:
            elsewhere = [v for v in client.list_tasks() if v.cluster == "c1"]
        copies = faultkit.read_copies([scenario.stack.copy_log(n) for n in scenario.names])
        twice = sum(faultkit.overlaps(c) for c in copies.values())
    finally:
        scenario.close()
    return {"fault": f"2 failover of {tasks} tasks", **figures,
            "running_elsewhere": len(elsewhere), "run_twice": twice,
            "eviction_rate": timing.eviction_rate}


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table."""
    lines = ["| fault | tasks | finished once | running once | queued (reason) | "
             "finished twice (in turn) | lost | run twice (at once) | notes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        notes = ", ".join(f"{k} {v}" for k, v in r.items() if k in (
            "failover_s", "grace_s", "over_grace_s", "drops", "frozen_s", "cut_off_s",
            "not_ready_samples", "running_at_kill", "adopted", "seconds"))
        lines.append(f"| {r['fault']} | {r.get('tasks', r.get('moved', ''))} | "
                     f"{r.get('finished_once', '')} | {r.get('running_once', '')} | "
                     f"{r.get('queued_with_reason', '')} | {r.get('finished_twice', '')} | "
                     f"{r.get('lost', '')} | "
                     f"{r.get('run_twice', '')} | {notes} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--only", action="append", default=[],
                        help="fault number(s) to run, e.g. 2 or 5b")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per fault")
    parser.add_argument("--failover-tasks", type=int, default=None)
    args = parser.parse_args()
    tasks = args.tasks or (30 if args.quick else 200)
    failover_tasks = args.failover_tasks or (100 if args.quick else 1000)
    chosen = [f for f in faultkit.FAULTS if not args.only or f.split()[0] in args.only]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fuyao-faults-") as tmp:
        for i, fault in enumerate(chosen):
            rows.append(faultkit.run_fault(fault, Path(tmp) / f"f{i}", tasks=tasks,
                                           batch=max(3, tasks // 40), every=0.3,
                                           nodes=4 if args.quick else 8))
            print(f"{fault}: {rows[-1]}", file=sys.stderr)
        if not args.only or "2" in args.only:
            rows.append(failover_run(Path(tmp) / "failover", failover_tasks))
            print(f"failover: {rows[-1]}", file=sys.stderr)
    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.node()} {platform.machine()} {platform.processor()}",
              "command": " ".join(["python", "bench/faults.py", *sys.argv[1:]]),
              "rows": rows, "lost": sum(r.get("lost", 0) for r in rows),
              "run_twice": sum(r.get("run_twice", 0) for r in rows)}
    out = Path(tempfile.gettempdir()) / f"fuyao-faults-{int(time.time())}.json"
    out.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result))
    else:
        print(table(rows))
        print(f"\n{result['date']}, {result['machine']}: `{result['command']}`; JSON: {out}")
    return 0 if result["lost"] == 0 and result["run_twice"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
