"""Conversions between store rows and records, and checks on what goes in.

Called only by ``hub.store.store``. Rows never leave the store: every read is converted to a
frozen record here, and every record becomes plain column values before it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from fuyao.errors import InvalidInput
from hub.store.records import (
    ClusterRecord,
    EventRecord,
    PlacementRecord,
    TaskRecord,
)
from hub.store.tables import ClusterRow, PlacementRow, TaskEventRow, TaskRow


def utc(value: datetime, what: str) -> datetime:
    """``value`` in UTC; a naive datetime is a caller bug, rejected with its field name."""
    if value.tzinfo is None:
        raise InvalidInput(f"{what} {value.isoformat()} has no timezone: pass an aware UTC time")
    return value.astimezone(UTC)


def utc_memo() -> Callable[[datetime, str], datetime]:
    """``utc``, remembering each value's answer: the rows of one commit share their ``now``
    (a 10,000-task failover writes 20,000 rows stamped with two instants)."""
    seen: dict[datetime, datetime] = {}

    def to_utc(value: datetime, what: str) -> datetime:
        out = seen.get(value)
        if out is None:
            out = seen[value] = utc(value, what)
        return out

    return to_utc


def utc_or_none(value: datetime | None, what: str) -> datetime | None:
    """``utc`` that lets ``None`` through."""
    return None if value is None else utc(value, what)


def aware(value: datetime | None) -> datetime | None:
    """A datetime read back from the database, as aware UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def must(value: datetime | None) -> datetime:
    """``aware`` for a NOT NULL column."""
    result = aware(value)
    assert result is not None, "NOT NULL timestamp read back as NULL"
    return result


def check_keys(changes: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    """Reject keys that are not updatable fields, naming them."""
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise InvalidInput(
            f"cannot update {what} field(s) {', '.join(unknown)}: "
            f"updatable are {', '.join(sorted(allowed))}"
        )


def normalize_times(changes: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``changes`` with its datetime fields checked and converted to UTC."""
    out = dict(changes)
    for key in fields:
        if key in out:
            out[key] = utc_or_none(out[key], key)
    return out


def cluster_record(row: ClusterRow) -> ClusterRecord:
    """A cluster row as a record."""
    return ClusterRecord(
        name=row.name, state=row.state, labels=dict(row.labels), weight=row.weight,
        headroom=row.headroom, cordoned=row.cordoned, created_at=must(row.created_at),
        last_heartbeat=aware(row.last_heartbeat), backend=row.backend,
        taints=[dict(t) for t in row.taints or []],
    )


def cluster_values(rec: ClusterRecord) -> dict[str, Any]:
    """A cluster record as column values."""
    return {
        "name": rec.name, "state": rec.state, "labels": dict(rec.labels),
        "weight": rec.weight, "headroom": rec.headroom, "cordoned": rec.cordoned,
        "created_at": utc(rec.created_at, "created_at"),
        "last_heartbeat": utc_or_none(rec.last_heartbeat, "last_heartbeat"),
        "backend": rec.backend, "taints": [dict(t) for t in rec.taints],
    }


def task_record(row: TaskRow) -> TaskRecord:
    """A task row as a record."""
    assert row.seq is not None, "a stored task always has a seq"
    return TaskRecord(
        id=row.id, name=row.name, spec=dict(row.spec), state=row.state, queue=row.queue,
        priority=row.priority, seq=row.seq, created_at=must(row.created_at),
        updated_at=must(row.updated_at), cluster=row.cluster, node=row.node,
        generation=row.generation, message=row.message, reasons=dict(row.reasons),
        scores=list(row.scores), owner=row.owner, parent=row.parent,
    )


def task_values(rec: TaskRecord) -> dict[str, Any]:
    """A task record as column values (without ``seq``: the database assigns it)."""
    return {
        "id": rec.id, "name": rec.name, "spec": dict(rec.spec), "state": rec.state,
        "queue": rec.queue, "priority": rec.priority,
        "created_at": utc(rec.created_at, "created_at"),
        "updated_at": utc(rec.updated_at, "updated_at"), "cluster": rec.cluster,
        "node": rec.node, "generation": rec.generation, "message": rec.message,
        "reasons": dict(rec.reasons), "scores": list(rec.scores), "owner": rec.owner,
        "parent": rec.parent,
    }


def event_record(row: TaskEventRow) -> EventRecord:
    """An event row as a record."""
    return EventRecord(
        task_id=row.task_id, at=must(row.at), kind=row.kind, message=row.message,
        cluster=row.cluster, generation=row.generation,
    )


def event_values(rec: EventRecord, to_utc: Callable[[datetime, str], datetime] = utc,
                 ) -> dict[str, Any]:
    """An event record as column values (``to_utc``: ``utc``, or a ``utc_memo``)."""
    return {
        "task_id": rec.task_id, "at": to_utc(rec.at, "event at"), "kind": rec.kind,
        "message": rec.message, "cluster": rec.cluster, "generation": rec.generation,
    }


def placement_record(row: PlacementRow) -> PlacementRecord:
    """A placement row as a record."""
    return PlacementRecord(
        task_id=row.task_id, cluster=row.cluster, generation=row.generation,
        at=must(row.at), nodes=list(row.nodes),
    )


def placement_values(rec: PlacementRecord,
                     to_utc: Callable[[datetime, str], datetime] = utc) -> dict[str, Any]:
    """A placement record as column values (``to_utc``: ``utc``, or a ``utc_memo``)."""
    return {
        "task_id": rec.task_id, "cluster": rec.cluster, "generation": rec.generation,
        "at": to_utc(rec.at, "placement at"), "nodes": list(rec.nodes),
    }
