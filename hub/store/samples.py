"""Capacity samples in the store: append, read back, and thin out with age.

``hub.planning.history.CapacityHistory`` calls these through the store writer (writes) and
reader threads (reads). A sample is one cluster x model row at one time
(``SampleRecord``). ``compact`` keeps recent samples as taken, averages older ones into one
row per (bucket, cluster, model) - timestamped at the bucket's start - and deletes what is
older than the retention; running it again changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta

from sqlmodel import col, delete, select

from hub.store.store import Store
from hub.store.tables import CapacitySampleRow

MAX_POINTS = 50_000


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """One cluster x model capacity sample (devices, cores and GiB)."""

    at: datetime
    cluster: str
    model: str
    nodes: int = 0
    devices_total: float = 0.0
    devices_allocated: float = 0.0
    devices_reserved: float = 0.0
    devices_free: float = 0.0
    devices_unschedulable: float = 0.0
    devices_fragmented: float = 0.0
    queued_tasks: float = 0.0
    queued_devices: float = 0.0
    cpu_total: float = 0.0
    cpu_allocated: float = 0.0
    cpu_reserved: float = 0.0
    cpu_free: float = 0.0
    memory_total_gib: float = 0.0
    memory_allocated_gib: float = 0.0
    memory_reserved_gib: float = 0.0
    memory_free_gib: float = 0.0


_AVERAGED = tuple(f.name for f in fields(SampleRecord) if f.name not in ("at", "cluster", "model"))


def add_samples(store: Store, samples: Sequence[SampleRecord]) -> None:
    """Append samples (one transaction)."""
    if not samples:
        return
    with store._write("add capacity samples") as s:
        for sample in samples:
            values = asdict(sample)
            values["devices_total"] = round(values["devices_total"])
            s.add(CapacitySampleRow(**values))


def list_samples(store: Store, since: datetime, *, cluster: str | None = None,
                 model: str | None = None, limit: int = MAX_POINTS) -> list[SampleRecord]:
    """Samples at or after ``since``, oldest first (at most ``limit``, the newest kept)."""
    with store._read("read capacity samples") as s:
        query = select(CapacitySampleRow).where(col(CapacitySampleRow.at) >= since)
        if cluster is not None:
            query = query.where(col(CapacitySampleRow.cluster) == cluster)
        if model is not None:
            query = query.where(col(CapacitySampleRow.model) == model)
        query = query.order_by(col(CapacitySampleRow.at).desc(),
                               col(CapacitySampleRow.id).desc()).limit(limit)
        rows = list(s.exec(query).all())
    return [_record(r) for r in reversed(rows)]


def compact(store: Store, now: datetime, *, raw_for: timedelta, keep_for: timedelta,
            bucket: timedelta) -> int:
    """Downsample samples older than ``raw_for`` into ``bucket`` averages and drop those
    older than ``keep_for``; returns how many rows were removed."""
    raw_cutoff, drop_cutoff = now - raw_for, now - keep_for
    step = bucket.total_seconds()
    removed = 0
    with store._write("compact capacity samples") as s:
        result = s.exec(delete(CapacitySampleRow)
                        .where(col(CapacitySampleRow.at) < drop_cutoff))
        removed += result.rowcount or 0
        old = s.exec(select(CapacitySampleRow)
                     .where(col(CapacitySampleRow.at) < raw_cutoff)).all()
        groups: dict[tuple[float, str, str], list[CapacitySampleRow]] = defaultdict(list)
        for row in old:
            at = _utc(row.at)
            start = at.timestamp() - at.timestamp() % step
            groups[(start, row.cluster, row.model)].append(row)
        for (start, cluster, model), rows in groups.items():
            if len(rows) == 1 and _utc(rows[0].at).timestamp() == start:
                continue    # already one averaged point
            mean = {name: sum(getattr(r, name) for r in rows) / len(rows) for name in _AVERAGED}
            mean["nodes"] = round(mean["nodes"])
            mean["devices_total"] = round(mean["devices_total"])
            for r in rows:
                s.delete(r)
            removed += len(rows) - 1
            s.add(CapacitySampleRow(at=datetime.fromtimestamp(start, UTC), cluster=cluster,
                                    model=model, **mean))
    return removed


def _utc(at: datetime | None) -> datetime:
    assert at is not None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _record(row: CapacitySampleRow) -> SampleRecord:
    return SampleRecord(at=_utc(row.at), cluster=row.cluster, model=row.model,
                        **{name: getattr(row, name) for name in _AVERAGED})
