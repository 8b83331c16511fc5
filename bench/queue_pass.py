"""The placement benchmark's A/B pass with the queueing layer in front (``--queues N``).

Called by ``placement_bench.py``. Both passes start from the same fleet (same seed) and play
the same requests through the cached scheduler, reserving what is placed and releasing the
oldest beyond ``--live``; the two passes are interleaved decision by decision so load on the
machine hits both alike. Pass A asks the scheduler directly, in request order. Pass B puts
every request in one of N queues (weights 1..N, gpu and cpu quotas, half of them with a
per-model quota) and plays them in the order one placement cycle gives (strict levels,
weighted DRF, FIFO, backfill holds), timing per decision what the hub's loop does:
``cycle.request`` (quota checks) + ``cycle.decide`` (schedule; again without held clusters
if it chose one) + ``cycle.admit`` + reserve +
``cycle.placed``/``missed``. ``begin`` (once per cycle, over all queued tasks) is timed apart.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.fleet import FleetView
from hub.placement import PlacementRequest, Scheduler, memshare
from hub.placement.profile import DEFAULT_PROFILE
from hub.queueing import Queueing, QueueingConfig
from hub.queueing.quota import QueueState
from hub.store import QueueRecord
from hub.taskbook import TaskBook

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _task(req: PlacementRequest, queue: str, seq: int) -> ActiveTask:
    r = req.requests
    spec = TaskSpec(name=req.name, cpu=f"{r.cpu_milli}m", memory=f"{r.memory_mib}Mi",
                    gpu=f"{r.gpu_milli}m", replicas=r.replicas, queue=queue,
                    gpu_memory=f"{r.gpu_memory_mib}Mi" if r.gpu_memory_mib else None)
    return ActiveTask(id=req.task_id, name=req.name, spec=spec, state=TaskState.QUEUED,
                      queue=queue, priority=req.priority, seq=seq, created_at=NOW,
                      updated_at=NOW, _request=req)


def _summary(samples: list[float]) -> dict[str, float]:
    mean = statistics.fmean(samples)
    return {"decisions": len(samples), "decisions_per_s": round(1 / mean, 1),
            "mean_us": round(mean * 1e6, 1)}


def ab(build: Callable[[], FleetView], reqs: list[PlacementRequest], queues: int,
       live: int) -> dict[str, Any]:
    """Decisions per second without and with the queueing layer, on the same fleet."""
    clock = time.perf_counter
    plain_fleet, fleet = build(), build()
    plain, scheduler = Scheduler(plain_fleet), Scheduler(fleet)
    book = TaskBook(writer=None, fleet=fleet)   # type: ignore[arg-type]
    layer = Queueing(book, fleet, DEFAULT_PROFILE, headroom_priority=1000,
                     config=QueueingConfig(hold_cycles=0, lookahead=len(reqs)))
    rng = random.Random(7)
    for i in range(queues):
        limits = {"gpu": 4000_000, "cpu": 40_000_000}
        if i % 2:
            limits["gpu.H100"] = 800_000
        state = QueueState(f"q{i}", weight=i + 1, limits=limits)
        layer.book.states[state.name] = state
        layer.book.records[state.name] = QueueRecord(state.name)
    for seq, req in enumerate(reqs):
        task = _task(req, f"q{rng.randrange(queues)}", seq)
        book.active[task.id] = task
    t0 = clock()
    cycle = layer.begin(book.queued())
    begin_s = clock() - t0
    a: list[float] = []
    b: list[float] = []
    held_a: deque[str] = deque()
    held_b: deque[str] = deque()
    # Interleaved, one decision of each at a time, so load on the machine hits both alike.
    for req, task in zip(reqs, cycle, strict=False):
        t0 = clock()
        result = plain.schedule(req)
        if result.cluster is not None and plain.reserve(req, result).ok:
            held_a.append(req.task_id)
        a.append(clock() - t0)
        while len(held_a) > live:
            plain_fleet.release(held_a.popleft())
        t0 = clock()
        request = cycle.request(task)
        if request is not None:
            request, result = cycle.decide(task, request, partial(memshare.schedule, scheduler))
            if (result.cluster is not None and cycle.admit(task, result)
                    and scheduler.reserve(request, result).ok):
                task.state, task.cluster = TaskState.PLACED, result.cluster
                cycle.placed(task, result)
                held_b.append(task.id)
            elif result.cluster is None:
                cycle.missed(task, request, result)
        b.append(clock() - t0)
        while len(held_b) > live:
            fleet.release(held_b.popleft())
    without, with_queues = _summary(a), _summary(b)
    return {
        "queues": queues, "queued_tasks": len(reqs),
        "without_queueing": without, "with_queueing": with_queues,
        "begin_cycle_ms": round(begin_s * 1e3, 1),
        "held_by_quota": len(cycle.held),
        "decisions_per_s_ratio": round(with_queues["decisions_per_s"]
                                       / without["decisions_per_s"], 3),
    }
