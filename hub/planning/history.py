"""Capacity history: the hub samples capacity into the store and reads it back.

``CapacityHistory.run`` (a hub loop started by ``Hub.start``) takes a sample every
``Timings.capacity_sample_interval`` seconds: per cluster and accelerator model, the
capacity row (total, allocated, reserved, free devices, cores, GiB) plus fragmented devices
(against the task mix, ``hub.planning.fragmentation``) and queued demand
(``hub.planning.report.queued_demand``). Every tenth sample it compacts: samples older than
``capacity_raw_retention`` become ``capacity_bucket`` averages, and those older than
``capacity_retention`` go (``hub.store.samples``). ``points`` serves
``GET /api/v1/capacity/history``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta

from fuyao.capacity import CapacityPoint
from fuyao.errors import InvalidInput
from fuyao.quantity import parse_duration
from hub.config import Timings
from hub.planning.fragmentation import fragmented_devices, shapes_from_specs
from hub.planning.planner import Planner
from hub.planning.report import queued_demand
from hub.store.samples import SampleRecord, add_samples, compact, list_samples
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

MAX_SINCE = 400 * 86_400.0
_SAMPLED = frozenset(f.name for f in fields(SampleRecord)) - {"at"}
COMPACT_EVERY = 10


class CapacityHistory:
    """Samples the planner's view into the store on a timer; answers history queries."""

    def __init__(self, planner: Planner, writer: StoreWriter, timings: Timings) -> None:
        self.planner = planner
        self.writer = writer
        self.timings = timings
        self.taken = 0

    def snapshot(self, now: datetime) -> list[SampleRecord]:
        """One sample per cluster and model of the fleet view as it is now."""
        fleet = self.planner.fleet
        shapes, _ = shapes_from_specs(t.spec for t in self.planner.active.values())
        clusters = fleet.clusters()
        queued, _ = queued_demand(clusters, self.planner.queued())
        out = []
        for cluster in clusters:
            fragmented = fragmented_devices(cluster, shapes)
            for row in fleet.capacity(cluster.name):
                tasks, devices = queued.get((row.cluster, row.model), (0, 0.0))
                values = {k: v for k, v in row.model_dump().items() if k in _SAMPLED}
                out.append(SampleRecord(
                    at=now, devices_fragmented=round(fragmented.get(row.model, 0.0), 3),
                    queued_tasks=tasks, queued_devices=devices, **values))
        return out

    async def sample(self) -> int:
        """Take one sample now (and compact every ``COMPACT_EVERY``); returns rows written."""
        now = datetime.now(UTC)
        rows = self.snapshot(now)
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
        """Sample forever (a failed sample is logged; the next one still comes)."""
        while True:
            try:
                await self.sample()
            except Exception:
                log.exception("capacity sample failed")
            await asyncio.sleep(self.timings.capacity_sample_interval)

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
