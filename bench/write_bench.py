"""The store's write transaction alone: CPU and wall a ``Store.write``, by what it carries.

The hub's store writer thread runs one ``Store.write`` per group commit: a REST submit's
tasks with their ``Submitted`` events and the submit's audit record, a placement slice's
updates, events and placements, an agent report's update and event. At a steady load in
small REST batches most of them carry a few rows, so what a transaction costs regardless
of its rows (its setup, the leader's epoch fence, the commit) is most of the writer's CPU,
and every millisecond of it is a millisecond the event loop may wait for the GIL
(``docs/benchmarks.md``, e2e section, "Twenty-second pass").

This opens a real store (SQLite in a temporary directory, or ``--store URL``, a PostgreSQL
database it may write to), migrates it, sets the leader's epoch fence as a leading hub
does, then times, one after another:

- ``submit``: ``--submits`` writes of one submit each, ``--tasks`` tasks a submit (the
  records ``TaskBook.submit`` builds, their events and an audit record);
- ``report``: as many writes of one agent report each (a stored task's update to Running
  and its event).

Each kind reports CPU (``time.thread_time``: the writer's own, its syscalls included) and
wall milliseconds a transaction, after ``--warm`` unmeasured ones. A/B against another tree:
run this with ``PYTHONPATH`` set to that tree, alternately (the machine is shared).

    python bench/write_bench.py                     # 2,000 submits of 10 tasks, 2,000 reports
    python bench/write_bench.py --tasks 1 --json
    python bench/write_bench.py --store postgresql://fuyao@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from flags import bench_main, check_bounds  # beside this file

from fuyao.spec import TaskSpec, TaskState
from hub.ha import EpochFence, Lease
from hub.ha.lease import Replica
from hub.store import EventRecord, Store, TaskUpdate
from hub.store.records import AuditRecord, NewTasks
from hub.taskbook import submit_records

BOUNDS = {"submits": (1, 100_000), "tasks": (1, 1000), "warm": (0, 10_000)}
SPEC = TaskSpec.model_validate({"name": "t", "gpu": 1, "duration": "30s"})


def _submit(prefix: str, tasks: int) -> NewTasks:
    """One REST submit as ``TaskBook.submit`` writes it, with its audit record."""
    specs = [SPEC.model_copy(update={"name": f"{prefix}-{i}"}) for i in range(tasks)]
    records, events = submit_records(specs, owner="bench")
    audit = AuditRecord(actor="bench", action="task.submit", target=records[0].name,
                        result=f"ok, {tasks} task(s)", request_id=uuid.uuid4().hex)
    return NewTasks(records, events, audit)


def _timed(calls: list[Callable[[], Any]], warm: int) -> dict[str, float]:
    """Run ``calls`` in order; CPU and wall ms a call, the first ``warm`` not counted."""
    for call in calls[:warm]:
        call()
    cpu, wall = time.thread_time(), time.perf_counter()
    for call in calls[warm:]:
        call()
    n = max(1, len(calls) - warm)
    return {"cpu_ms": round((time.thread_time() - cpu) * 1e3 / n, 4),
            "wall_ms": round((time.perf_counter() - wall) * 1e3 / n, 4)}


@contextmanager
def fenced(store: Store) -> Iterator[Store]:
    """``store`` migrated, with the lease a leading hub holds and its epoch fence on every
    write, as the hub's writer runs; the lease given up after."""
    store.migrate()
    lease = Lease(store.url.render_as_string(hide_password=False),
                  Replica(uuid.uuid4().hex, "bench", "bench", "bench"))
    epoch = lease.try_acquire()
    if epoch is None:
        raise SystemExit("another hub leads on this store: give the bench its own database")
    store.fence = EpochFence(epoch, lambda current: None)
    try:
        yield store
    finally:
        lease.close()


@contextmanager
def bench_store(url: str, prefix: str) -> Iterator[Store]:
    """``fenced`` on the store at ``url``, or on SQLite in a temporary directory if empty."""
    if url:
        with fenced(Store(url)) as store:
            yield store
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, \
            fenced(Store(f"sqlite:///{Path(tmp) / 'hub.db'}")) as store:
        yield store


def _timed_kinds(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    count = args.submits + args.warm
    run = uuid.uuid4().hex[:8]
    submits = [_submit(f"w{run}-{i}", args.tasks) for i in range(count)]
    submit = _timed([partial(store.write, [s]) for s in submits], args.warm)
    reports = [[TaskUpdate(s.tasks[0].id, {"state": TaskState.RUNNING.value, "node": "n-0",
                                           "updated_at": datetime.now(UTC)})]
               for s in submits]
    events = [[EventRecord(s.tasks[0].id, datetime.now(UTC), "Running", "on n-0")]
              for s in submits]
    report = _timed([partial(store.write, (), u, e)
                     for u, e in zip(reports, events, strict=True)], args.warm)
    return {"store": store.backend, "submits": args.submits, "tasks_per_submit": args.tasks,
            "warm": args.warm, "submit": submit, "report": report}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    with bench_store(args.store, "write-bench-") as store:
        return _timed_kinds(store, args)


def markdown(result: dict[str, Any]) -> str:
    """The figures as a markdown table."""
    rows = [(f"submit ({result['tasks_per_submit']} task(s))", result["submit"]),
            ("agent report (1 update, 1 event)", result["report"])]
    return "\n".join([f"{result['store']}, {result['submits']} transactions of each kind",
                      "", "| transaction | CPU ms | wall ms |", "|---|---|---|",
                      *(f"| {k} | {v['cpu_ms']} | {v['wall_ms']} |" for k, v in rows)])


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submits", type=int, default=2000,
                        help="measured transactions of each kind")
    parser.add_argument("--tasks", type=int, default=10, help="tasks a submit")
    parser.add_argument("--warm", type=int, default=50, help="first transactions not measured")
    parser.add_argument("--store", default="", help="a store URL (default: SQLite in a "
                        "temporary directory)")
    parser.add_argument("--quick", action="store_true", help="CI size: 100 of each")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.quick:
        args.submits, args.warm = 100, 5
    return args


def main(argv: list[str] | None = None) -> int:
    """Parse, run, print."""
    return bench_main(parse, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
