"""The store writer's commits with the event loop idle, beside a loop busy in slices, and
beside a thread running Python.

The hub commits on one writer thread (``hub.writer.StoreWriter``) while its event loop
thread decides: a placement cycle runs Python for ``hub.loops.SLICE_SECONDS`` at a time,
then ``await asyncio.sleep(0)`` lets the loop poll its sockets, and goes on. Both threads
need the interpreter's lock (the GIL) for their Python, and the writer takes it back after
every SQLite call: with ``executemany`` once per row. A thread waiting for the lock asks
the holder to drop it only after the switch interval (5 ms) passes *without the lock
changing hands*; the loop's poll releases and retakes it every slice, which wakes the
waiting writer and restarts its wait before it can ask, so while the loop keeps slicing
the writer hardly runs at all (``docs/benchmarks.md``, "The store writer beside a slicing
loop"). A failover's first commits wait for the end of the cycle's decisions this way.

This opens a real store (SQLite in a temporary directory, or ``--store URL``), with the
leader's epoch fence as ``write_bench.py`` does, stores ``--tasks`` tasks, and commits
placement slices through a real ``StoreWriter`` (``--batch`` tasks a commit: each task's
update to Placed, its event and its placement record, as ``TaskBook.stage`` writes them),
one after another for ``--seconds``, twice (three times with ``--give-way-ms``):

- ``idle``: nothing else runs; the loop waits in its poll between commits;
- ``slicing``: a coroutine on the same loop runs Python in slices of ``--slice-ms`` and
  ``await asyncio.sleep(0)`` between them, as a placement cycle does;
- ``thread``: another thread runs Python without a pause (the loop idle), as the hub's
  event loop does while it decodes a burst of REST bodies or agent reports: the writer gets
  the lock only when the switch interval forces it loose, so what costs is how often a
  commit lets go of the lock - once a row with ``executemany``, a few times a statement
  with the store's rows in one call on SQLite (``hub.store.bulk``);
- ``giving_way`` (with ``--give-way-ms``): the same, but after each slice, while a commit
  is queued or runs on the writer thread, the coroutine blocks (the lock released) until it
  ends, at most ``--give-way-ms``: a hand-off the hub could make at each slice of a cycle.
  What it costs the loop shows in the slices it runs against ``slicing``'s.

``--yields`` sets how many turns the loop gets between two slices (the cycle takes one).
Whatever waits on a commit moves one step a turn - the thread's result reaches the
writer's flush task, which resolves the caller's future, which wakes the caller, which
queues the next commit for a new flush task to hand to the thread - so with one turn a
slice a commit's chain costs several slices of the loop even when the writer is let in.

Reported for each: commits and rows made durable within the window, rows a second, the
median commit's wall milliseconds, the slices the loop ran (0 when idle) and the
milliseconds it spent giving way (0 but in ``giving_way``), and the ratio of
``slicing``'s (``giving_way``'s, ``thread``'s) rows a second to ``idle``'s. A commit still
in flight when the window ends is not counted (it finishes once the loop stops slicing).

    python bench/writer_beside_bench.py                 # 150 rows a commit, 3 s each
    python bench/writer_beside_bench.py --batch 1000 --json
    python bench/writer_beside_bench.py --give-way-ms 10 --yields 8
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from flags import bench_main, check_bounds  # beside this file
from write_bench import bench_store  # beside this file

from fuyao.spec import TaskSpec, TaskState
from hub.loops import SLICE_SECONDS
from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate
from hub.taskbook import submit_records
from hub.writer import StoreWriter

BOUNDS = {"tasks": (1, 100_000), "batch": (1, 10_000), "seconds": (0.1, 600),
          "slice_ms": (0.1, 1000), "give_way_ms": (0, 1000),
          "yields": (1, 100)}
SPEC = TaskSpec.model_validate({"name": "t", "cpu": "500m", "memory": "1Gi"})
Slice = tuple[list[TaskUpdate], list[EventRecord], list[PlacementRecord]]


def _store_tasks(store: Store, tasks: int) -> list[str]:
    """``tasks`` Queued tasks stored (named apart from any a database already holds);
    their ids."""
    ids: list[str] = []
    run = uuid.uuid4().hex[:8]
    for start in range(0, tasks, 1000):
        specs = [SPEC.model_copy(update={"name": f"w{run}-{i}"})
                 for i in range(start, min(tasks, start + 1000))]
        records, events = submit_records(specs, owner="bench")
        store.add_tasks(records, events)
        ids += [r.id for r in records]
    return ids


def _placement_slice(ids: list[str], generation: int) -> Slice:
    """``ids`` placed on c1 at ``generation``: what ``TaskBook.stage`` commits for them."""
    now = datetime.now(UTC)
    message = "placed on c1 (score 71.5)"
    updates = [TaskUpdate(i, {"state": TaskState.PLACED.value, "cluster": "c1", "node": None,
                              "generation": generation, "message": message, "reasons": {},
                              "scores": [{"cluster": "c1", "feasible": True, "score": 71.5}],
                              "updated_at": now}) for i in ids]
    events = [EventRecord(i, now, "Placed", message, "c1", generation) for i in ids]
    placements = [PlacementRecord(i, "c1", generation, now, []) for i in ids]
    return updates, events, placements


class _Committing:
    """Whether a commit is queued or runs on the writer thread: ``idle`` cleared by the loop
    as it queues one (a starved writer thread may not even have started it), set on the
    writer thread when the store's ``apply``, wrapped here, returns."""

    def __init__(self, store: Store) -> None:
        self.idle = threading.Event()
        self.idle.set()
        apply = store.apply

        def wrapped(*args: Any, **kwargs: Any) -> None:
            try:
                apply(*args, **kwargs)
            finally:
                self.idle.set()
        store.apply = wrapped     # type: ignore[method-assign]


async def _slicing(stop: asyncio.Event, slice_s: float, give_way_s: float, yields: int,
                   committing: _Committing) -> tuple[int, float]:
    """Python in slices of ``slice_s`` with ``yields`` turns of the loop between them, until
    ``stop``; with ``give_way_s``, first a wait of at most that long for a queued or running
    commit to end. Returns the slices run and the seconds spent waiting."""
    slices, waited = 0, 0.0
    while not stop.is_set():
        until = time.perf_counter() + slice_s
        while time.perf_counter() < until:
            sum(range(64))
        slices += 1
        if give_way_s and not committing.idle.is_set():
            began = time.perf_counter()
            committing.idle.wait(give_way_s)     # blocks the loop, the lock released
            waited += time.perf_counter() - began
        for _ in range(yields):
            await asyncio.sleep(0)
    return slices, waited


def _spinning(stop: threading.Event) -> None:
    """Python without a pause until ``stop`` (the ``thread`` condition's other thread)."""
    while not stop.is_set():
        sum(range(64))


async def _window(writer: StoreWriter, ids: list[str], args: argparse.Namespace,
                  slicing: bool, generation: int, committing: _Committing,
                  give_way_s: float = 0.0, spinning: bool = False) -> dict[str, Any]:
    """Commit slices one after another for ``args.seconds``; the figures of one condition."""
    stop = asyncio.Event()
    busy = (asyncio.create_task(_slicing(stop, args.slice_ms / 1000, give_way_s, args.yields,
                                           committing))
            if slicing else None)
    halt = threading.Event()
    spinner = threading.Thread(target=_spinning, args=(halt,), daemon=True) if spinning else None
    if spinner is not None:
        spinner.start()
    walls: list[float] = []
    rows = start = 0
    in_flight: asyncio.Future[None] | None = None
    started = time.perf_counter()
    deadline = started + args.seconds
    while time.perf_counter() < deadline:
        batch = ids[start:start + args.batch]
        start = 0 if start + args.batch >= len(ids) else start + args.batch
        generation += 1
        committing.idle.clear()
        commit = asyncio.ensure_future(writer.apply(*_placement_slice(batch, generation)))
        began = time.perf_counter()
        done, _ = await asyncio.wait({commit}, timeout=max(0.0, deadline - began))
        if not done:
            in_flight = commit      # still in flight at the window's end: not counted
            break
        commit.result()
        walls.append(time.perf_counter() - began)
        rows += len(batch)
    elapsed = time.perf_counter() - started
    stop.set()
    halt.set()
    if spinner is not None:
        spinner.join()
    slices, waited = await busy if busy is not None else (0, 0.0)
    if in_flight is not None:
        await in_flight     # durable before the next condition starts
    return {"commits": len(walls), "rows": rows, "rows_per_s": round(rows / elapsed, 1),
            "median_commit_ms": round(statistics.median(walls) * 1e3, 2) if walls else None,
            "loop_slices": slices, "loop_waited_ms": round(waited * 1e3, 2)}


async def _measure(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    ids = _store_tasks(store, args.tasks)
    committing = _Committing(store)
    writer = StoreWriter(store)
    giving: dict[str, Any] | None = None
    try:
        idle = await _window(writer, ids, args, False, 0, committing)
        # generations apart from the first window's: each commit a new placement of its tasks
        slicing = await _window(writer, ids, args, True, 1_000_000, committing)
        if args.give_way_ms:
            giving = await _window(writer, ids, args, True, 2_000_000, committing,
                                   args.give_way_ms / 1000)
        thread = await _window(writer, ids, args, False, 3_000_000, committing,
                               spinning=True)
    finally:
        writer.close()

    def vs_idle(window: dict[str, Any]) -> float | None:
        return (round(window["rows_per_s"] / idle["rows_per_s"], 4) if idle["rows_per_s"]
                else None)
    out = {"store": store.backend, "tasks": args.tasks, "batch": args.batch,
           "seconds": args.seconds, "slice_ms": args.slice_ms, "give_way_ms": args.give_way_ms,
           "yields": args.yields,
           "idle": idle, "slicing": slicing, "slicing_vs_idle": vs_idle(slicing),
           "thread": thread, "thread_vs_idle": vs_idle(thread)}
    if giving is not None:
        out |= {"giving_way": giving, "giving_way_vs_idle": vs_idle(giving)}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    with bench_store(args.store, "writer-beside-bench-") as store:
        return asyncio.run(_measure(store, args))


def markdown(result: dict[str, Any]) -> str:
    """The figures as a markdown table."""
    head = (f"{result['store']}, {result['batch']} placements a commit, "
            f"{result['seconds']:g} s a condition, slices of {result['slice_ms']:g} ms, "
            f"{result['yields']} turn(s) of the loop between slices")
    rows = [("loop idle", result["idle"]),
            (f"loop slicing ({result['slicing_vs_idle']}x idle's rows/s)", result["slicing"])]
    if "giving_way" in result:
        rows.append((f"loop slicing, giving way up to {result['give_way_ms']:g} ms "
                     f"({result['giving_way_vs_idle']}x idle's rows/s)", result["giving_way"]))
    rows.append((f"a thread running Python ({result['thread_vs_idle']}x idle's rows/s)",
                 result["thread"]))
    return "\n".join([head, "", "| beside the writer | commits | rows | rows/s | median "
                      "commit ms | loop slices |", "|---|---|---|---|---|---|",
                      *(f"| {k} | {v['commits']} | {v['rows']} | {v['rows_per_s']} | "
                        f"{v['median_commit_ms']} | {v['loop_slices']} |" for k, v in rows)])


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=3000, help="tasks stored")
    parser.add_argument("--batch", type=int, default=150, help="placements a commit")
    parser.add_argument("--seconds", type=float, default=3.0, help="window of each condition")
    parser.add_argument("--slice-ms", type=float, default=SLICE_SECONDS * 1000,
                        help="the slicing coroutine's slice (default: the placement cycle's)")
    parser.add_argument("--give-way-ms", type=float, default=0.0,
                        help="also a window where each slice first waits up to this long "
                        "for a queued or running commit (0: not run)")
    parser.add_argument("--yields", type=int, default=1,
                        help="turns of the event loop between two slices (each "
                        "``await asyncio.sleep(0)``; the placement cycle takes one)")
    parser.add_argument("--store", default="", help="a store URL (default: SQLite in a "
                        "temporary directory)")
    parser.add_argument("--quick", action="store_true",
                        help="CI size: 300 tasks, 50 a commit, 0.5 s each")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.quick:
        args.tasks, args.batch, args.seconds = 300, 50, 0.5
    return args


def main(argv: list[str] | None = None) -> int:
    """Parse, run, print."""
    return bench_main(parse, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
