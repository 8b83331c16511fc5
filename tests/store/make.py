"""Small record factories for the store tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hub.store import ClusterRecord, EventRecord, TaskRecord

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0`` plus some seconds."""
    return T0 + timedelta(seconds=seconds)


def cluster(name: str, **changes: Any) -> ClusterRecord:
    """A Ready cluster record."""
    fields: dict[str, Any] = {
        "state": "Ready", "labels": {"fuyao.io/region": "east"}, "weight": 1,
        "headroom": 0.1, "cordoned": False, "created_at": T0,
    }
    fields.update(changes)
    return ClusterRecord(name=name, **fields)


def task(name: str, **changes: Any) -> TaskRecord:
    """A Queued task record whose id is ``id-<name>`` (``seq`` is assigned by the store)."""
    fields: dict[str, Any] = {
        "id": f"id-{name}", "spec": {"name": name, "gpu": {"model": "A100", "count": 1}},
        "state": "Queued", "queue": "default", "priority": 0, "seq": 0,
        "created_at": T0, "updated_at": T0,
    }
    fields.update(changes)
    return TaskRecord(name=name, **fields)


def submitted(rec: TaskRecord) -> EventRecord:
    """The event the hub records when a task is submitted."""
    return EventRecord(task_id=rec.id, at=rec.created_at, kind="Submitted", message="queued")
