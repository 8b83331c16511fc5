"""The store's queue operations: a mixin of ``Store`` (kept apart so the store stays short).

``hub.queueing.QueueBook`` calls these through the store writer: ``list_queues`` at start,
``put_queue`` on create/update, ``delete_queue`` on delete. Records are plain frozen
dataclasses (``QueueRecord``), never rows.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlmodel import Session, col, select

from fuyao.errors import Conflict, NotFound
from hub.store.tables import QueueRow


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A stored queue (quantities as the user wrote them)."""

    name: str
    priority: int = 0
    weight: int = 1
    quotas: dict[str, str] = field(default_factory=dict)
    cluster_quotas: dict[str, dict[str, str]] = field(default_factory=dict)
    borrow: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None


def _record(row: QueueRow) -> QueueRecord:
    return QueueRecord(row.name, row.priority, row.weight, dict(row.quotas),
                       {k: dict(v) for k, v in row.cluster_quotas.items()}, dict(row.borrow),
                       row.created_at, row.updated_at)


class QueueRows:
    """Queue rows: list, create or replace, delete."""

    if TYPE_CHECKING:
        def _read(self, what: str) -> AbstractContextManager[Session]: ...
        def _write(self, what: str) -> AbstractContextManager[Session]: ...

    def list_queues(self) -> list[QueueRecord]:
        """Every stored queue, by name."""
        with self._read("list queues") as s:
            return [_record(r) for r in s.exec(select(QueueRow).order_by(col(QueueRow.name)))]

    def put_queue(self, rec: QueueRecord, *, create: bool) -> QueueRecord:
        """Create a queue (Conflict if it exists) or replace one (NotFound if it does not)."""
        now = datetime.now(UTC)
        with self._write(f"{'create' if create else 'update'} queue {rec.name}") as s:
            row = s.get(QueueRow, rec.name)
            if create and row is not None:
                raise Conflict(f"queue {rec.name} already exists")
            if not create and row is None:
                raise NotFound(f"queue {rec.name} not found")
            if row is None:
                row = QueueRow(name=rec.name, created_at=now)
            row.priority, row.weight = rec.priority, rec.weight
            row.quotas, row.borrow = dict(rec.quotas), dict(rec.borrow)
            row.cluster_quotas = {k: dict(v) for k, v in rec.cluster_quotas.items()}
            row.updated_at = now
            s.add(row)
            s.flush()
            return _record(row)

    def delete_queue(self, name: str) -> None:
        """Delete a queue; NotFound if absent."""
        with self._write(f"delete queue {name}") as s:
            row = s.get(QueueRow, name)
            if row is None:
                raise NotFound(f"queue {name} not found")
            s.delete(row)

