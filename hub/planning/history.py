"""Capacity history: the hub samples capacity into the store and reads it back.

``CapacityHistory.run`` (a loop started by ``Hub.lead``) takes a sample - on the live fleet
view, a cluster at a time, the loop running between clusters - every
``Timings.capacity_sample_interval`` seconds, or less often so that sampling takes at most
``SAMPLE_SHARE`` of the time (100 clusters x 1,000 nodes: ~5 s of CPU a sample): per
cluster and accelerator model, the capacity row (total, allocated, reserved, free devices,
cores, GiB) plus fragmented devices (against the task mix, ``hub.planning.fragmentation``)
and queued demand (``hub.planning.report.queued_demand``). Every tenth sample it compacts:
samples older than ``capacity_raw_retention`` become ``capacity_bucket`` averages, and those
older than ``capacity_retention`` go (``hub.store.samples``). ``points`` serves ``GET
/api/v1/capacity/history``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta

from fuyao.capacity import CapacityPoint
from fuyao.errors import InvalidInput
from fuyao.quantity import parse_duration
from fuyao.selector import Selector
from fuyao.spec import TaskSpec
from hub.config import Timings
from hub.fleet import ClusterInfo
from hub.planning.fragmentation import WeightedShape, fragmented_devices, shapes_from_specs
from hub.planning.planner import Planner
from hub.planning.report import queued_demand
from hub.store.samples import SampleRecord, add_samples, compact, list_samples
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

MAX_SINCE = 400 * 86_400.0
_SAMPLED = frozenset(f.name for f in fields(SampleRecord)) - {"at"}
COMPACT_EVERY = 10
Queued = list[tuple[TaskSpec, Selector, str]]   # (spec, selector, its text) of queued tasks
SAMPLE_SHARE = 0.05   # at most this share of the hub's time goes to sampling


class CapacityHistory:
    """Samples the planner's view into the store on a timer; answers history queries."""

    def __init__(self, planner: Planner, writer: StoreWriter, timings: Timings) -> None:
        self.planner = planner
        self.writer = writer
        self.timings = timings
        self.taken = 0

    async def snapshot_stepwise(self, now: datetime) -> list[SampleRecord]:
        """One sample per cluster and model of the live fleet view, a cluster at a time, the
        event loop running between clusters: each cluster's rows are read whole at one moment
        (the live view changes only on the loop), the task mix and the queue once at the
        start. No copy (at 1,000 x 1,000 a copy took ~55 s of CPU and ~0.9 GiB); a cluster
        removed before its turn is left out."""
        planner = self.planner
        shapes, queued = self._mix(planner)
        out: list[SampleRecord] = []
        for cluster in planner.fleet.clusters():
            if planner.fleet.cluster(cluster.name) is cluster:
                out.extend(self._rows(planner, cluster, shapes, queued, now))
            await asyncio.sleep(0)
        return out

    @staticmethod
    def _mix(planner: Planner) -> tuple[list[WeightedShape], Queued]:
        """The task mix's shapes and the queued tasks, as they are now."""
        shapes, _ = shapes_from_specs(t.spec for t in planner.active.values())
        return shapes, list(planner.queued())

    @staticmethod
    def _rows(planner: Planner, cluster: ClusterInfo, shapes: list[WeightedShape],
              queued: Queued, now: datetime) -> list[SampleRecord]:
        """One cluster's rows: capacity, fragmented devices, queued demand per model."""
        fragmented = fragmented_devices(cluster, shapes)
        demand, _ = queued_demand([cluster], queued)
        out = []
        for row in planner.fleet.capacity(cluster.name):
            tasks, devices = demand.get((row.cluster, row.model), (0, 0.0))
            values = {k: v for k, v in row.model_dump().items() if k in _SAMPLED}
            out.append(SampleRecord(
                at=now, devices_fragmented=round(fragmented.get(row.model, 0.0), 3),
                queued_tasks=tasks, queued_devices=devices, **values))
        return out

    async def sample(self) -> int:
        """Take one sample now (and compact every ``COMPACT_EVERY``); returns rows written."""
        now = datetime.now(UTC)
        rows = await self.snapshot_stepwise(now)
        await self.writer.call(add_samples, self.writer.store, rows)
        self.taken += 1
        if self.taken % COMPACT_EVERY == 0:
            t = self.timings
            await self.writer.call(
                compact, self.writer.store, now,
                raw_for=timedelta(seconds=t.capacity_raw_retention),
                keep_for=timedelta(seconds=t.capacity_retention),
                bucket=timedelta(seconds=t.capacity_bucket))
        return len(rows)

    async def run(self) -> None:
        """Sample forever (a failed sample is logged; the next one still comes), pausing
        ``pause`` after each."""
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except Exception:
                log.exception("capacity sample failed")
            await asyncio.sleep(self.pause(time.monotonic() - started))

    def pause(self, took: float) -> float:
        """Seconds to wait after a sample that took ``took`` seconds: the configured interval,
        or longer so that sampling takes at most ``SAMPLE_SHARE`` of the time."""
        interval = self.timings.capacity_sample_interval
        stretched = took * (1 / SAMPLE_SHARE - 1)
        if stretched > interval:
            log.info("capacity sample took %.1f s; the next in %.0f s (at most %d%% of the "
                     "hub's time goes to sampling)", took, stretched, SAMPLE_SHARE * 100)
            return stretched
        return interval

    async def points(self, since: str, *, cluster: str | None = None,
                     model: str | None = None) -> list[CapacityPoint]:
        """Samples from ``since`` ago until now, oldest first."""
        seconds = parse_duration(since)
        if not 0 < seconds <= MAX_SINCE:
            raise InvalidInput(f"since: {since!r} must be more than 0 and at most 400 days")
        start = datetime.now(UTC) - timedelta(seconds=seconds)
        records = await self.writer.read(list_samples, self.writer.store, start,
                                         cluster=cluster, model=model)
        return [CapacityPoint.model_validate(asdict(r)) for r in records]
