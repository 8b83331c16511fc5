"""The store writer's commit beside a busy event loop: SQLite's many-row statements against
the driver's per-row ``executemany``.

The hub commits in a writer thread while its event loop thread decides. ``sqlite3``'s
``executemany`` lets go of the GIL around each row's step and must take it back for the
next; while the other thread runs Python it gets it back only when that thread is made to
drop it (every ``sys.getswitchinterval()``). ``hub.store.bulk`` writes SQLite's rows as
many-row statements instead. This bench measures one ``Store.apply`` of N placements (N
task updates, N events, N placement rows: a placement cycle's commit) on a fresh SQLite
store of N tasks, in a thread, with the main thread idle and with it busy in a Python loop
(standing in for the event loop deciding), both ways: ``many-row`` (the store as it is) and
``per-row`` (``hub.store.bulk``'s many-row form turned off: each statement one
``executemany``, as before 2026-12-06).

Reported: each commit's wall time and the writer thread's CPU, and per way the busy wall
against the idle one. No timing is asserted anywhere; figures go into docs/reliability.md
("10,000 tasks in process, fifteenth session").

    python bench/writer_bench.py                    # 2,000 rows (per-row busy: ~25 s)
    python bench/writer_bench.py --rows 500 --repeat 3
    python bench/writer_bench.py --quick --json     # CI size, one JSON object
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from flags import bench_main, check_bounds  # beside this file

import hub.store.bulk as bulk
from hub.store import EventRecord, PlacementRecord, Store, TaskRecord, TaskUpdate

WAYS = ("many-row", "per-row")
AT = datetime(2026, 12, 6, tzinfo=UTC)


@contextmanager
def _way(way: str) -> Iterator[None]:
    """The store's many-row form as it is, or turned off (per-row executemany)."""
    many_row = bulk._many_row
    if way == "per-row":
        bulk._many_row = lambda *_: None
    try:
        yield
    finally:
        bulk._many_row = many_row


def _store(path: str, rows: int) -> Store:
    store = Store(f"sqlite:///{path}")
    store.migrate()
    store.add_tasks([TaskRecord(id=f"id-t{i}", name=f"t{i}", spec={"name": f"t{i}"},
                                state="Queued", queue="default", priority=0, seq=0,
                                created_at=AT, updated_at=AT) for i in range(rows)], [])
    return store


def _commit(store: Store, rows: int, busy: bool) -> tuple[float, float]:
    """One placement-cycle-like commit in a thread (the main thread idle or busy): its
    wall seconds and the writer thread's CPU seconds."""
    updates = [TaskUpdate(f"id-t{i}", {
        "state": "Placed", "cluster": "c1", "generation": 1, "updated_at": AT,
        "message": "placed on c1 (score 1395.8)",
        "scores": [["ClusterWeight", "Headroom"], ["c1", 1395.8, [100.0, 95.8]]]})
        for i in range(rows)]
    events = [EventRecord(f"id-t{i}", AT, "Placed", "placed on c1", "c1", 1)
              for i in range(rows)]
    placements = [PlacementRecord(f"id-t{i}", "c1", 1, AT, ["c1-0"]) for i in range(rows)]
    out: dict[str, tuple[float, float]] = {}

    def write() -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        store.apply(updates, events, placements)
        out["commit"] = (time.perf_counter() - wall, time.thread_time() - cpu)

    writer = threading.Thread(target=write)
    writer.start()
    while busy and writer.is_alive():
        total = 0
        for i in range(2000):     # Python, never letting go of the GIL on its own
            total += i
    writer.join()
    return out["commit"]


def _one(way: str, rows: int, busy: bool) -> dict[str, Any]:
    with _way(way), tempfile.TemporaryDirectory(prefix="writer-bench-") as tmp:
        store = _store(os.path.join(tmp, "hub.db"), rows)
        try:
            wall, cpu = _commit(store, rows, busy)
        finally:
            store.close()
    return {"way": way, "main": "busy" if busy else "idle", "rows": rows,
            "wall_s": round(wall, 4), "writer_cpu_s": round(cpu, 4)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Each way, idle then busy, ``--repeat`` times (ways alternated)."""
    runs = [_one(way, args.rows, busy) for _ in range(args.repeat) for way in WAYS
            for busy in (False, True)]
    summary = {}
    for way in WAYS:
        walls = {main: sorted(r["wall_s"] for r in runs if r["way"] == way
                              and r["main"] == main) for main in ("idle", "busy")}
        idle, busy = (walls[m][len(walls[m]) // 2] for m in ("idle", "busy"))
        summary[way] = {"idle_wall_s": idle, "busy_wall_s": busy,
                        "busy_over_idle": round(busy / idle, 1) if idle else None}
    return {"rows": args.rows, "load": os.getloadavg()[0], "python": sys.version.split()[0],
            "switch_interval_s": sys.getswitchinterval(), "runs": runs,
            "medians": summary}


def markdown(result: dict[str, Any]) -> str:
    """The runs as a table, then the medians."""
    lines = [f"one Store.apply of {result['rows']} placements (updates, events, placement "
             f"rows) in a thread, SQLite, load {result['load']:.1f}", "",
             "| way | main thread | wall s | writer CPU s |", "|---|---|---|---|"]
    lines += [f"| {r['way']} | {r['main']} | {r['wall_s']} | {r['writer_cpu_s']} |"
              for r in result["runs"]]
    lines += ["", "| way | idle wall s (median) | busy wall s (median) | busy / idle |",
              "|---|---|---|---|"]
    lines += [f"| {way} | {m['idle_wall_s']} | {m['busy_wall_s']} | {m['busy_over_idle']} |"
              for way, m in result["medians"].items()]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=2000, help="placements in the commit")
    p.add_argument("--repeat", type=int, default=1, help="runs of each way and thread state")
    p.add_argument("--quick", action="store_true", help="CI size: 200 rows")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    check_bounds(p, args, {"rows": (1, 100_000), "repeat": (1, 20)})
    if args.quick:
        args.rows = 200
    return args


def main(argv: list[str] | None = None, emit: Callable[[str], None] = print) -> int:
    """Run and print (markdown, or JSON with ``--json``)."""
    return bench_main(parse, run, markdown, argv, emit)


if __name__ == "__main__":
    sys.exit(main())
