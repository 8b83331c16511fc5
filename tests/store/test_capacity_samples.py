"""Capacity samples: appended, read back by window and filter, downsampled and expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub.store import MIGRATIONS, Store
from hub.store.samples import SampleRecord, add_samples, compact, list_samples

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def sample(minutes: float, cluster: str = "a", model: str = "H100",
           allocated: float = 0.0) -> SampleRecord:
    return SampleRecord(at=T0 + timedelta(minutes=minutes), cluster=cluster, model=model,
                        devices_total=8, devices_allocated=allocated, queued_tasks=1)


def test_samples_come_back_oldest_first_and_filtered(store: Store) -> None:
    add_samples(store, [sample(2, allocated=2), sample(1, allocated=1),
                        sample(1, "b", "A100"), sample(-30)])
    points = list_samples(store, T0)
    assert [(p.at, p.cluster, p.devices_allocated) for p in points] == [
        (T0 + timedelta(minutes=1), "a", 1.0), (T0 + timedelta(minutes=1), "b", 0.0),
        (T0 + timedelta(minutes=2), "a", 2.0)]
    assert [p.cluster for p in list_samples(store, T0, model="A100")] == ["b"]
    assert len(list_samples(store, T0 - timedelta(hours=1), cluster="a")) == 3


def test_old_samples_are_averaged_per_bucket_then_dropped(store: Store) -> None:
    # 12:00..12:09 every minute, allocated = minute; now 13:00, raw kept 30 min,
    # 10-minute buckets, 2 h retention; plus one sample 3 h old.
    add_samples(store, [sample(m, allocated=m) for m in range(10)] + [sample(-180)]
                + [sample(45, allocated=5)])
    now = T0 + timedelta(hours=1)
    rules = {"raw_for": timedelta(minutes=30), "keep_for": timedelta(hours=2),
             "bucket": timedelta(minutes=10)}
    removed = compact(store, now, **rules)
    assert removed == 1 + 9                     # the expired one; ten became one
    points = list_samples(store, T0 - timedelta(hours=5))
    assert [(p.at, p.devices_allocated, p.devices_total, p.queued_tasks) for p in points] == [
        (T0, 4.5, 8, 1.0), (T0 + timedelta(minutes=45), 5.0, 8, 1.0)]
    assert compact(store, now, **rules) == 0    # idempotent


def test_a_first_release_store_gains_the_demand_columns(empty_url: str) -> None:
    old = Store(empty_url)
    assert old.migrate(MIGRATIONS[:1]) == 1
    old.close()
    new = Store(empty_url)
    assert new.migrate() >= 2
    add_samples(new, [SampleRecord(at=T0, cluster="a", model="H100", devices_fragmented=1.5,
                                   queued_devices=4)])
    [point] = list_samples(new, T0)
    assert (point.devices_fragmented, point.queued_devices) == (1.5, 4.0)
    new.close()
