"""The queues themselves: load, create, update, delete, kept in memory and written through.

``QueueBook`` is owned by ``hub.queueing.Queueing``; the REST router (``hub.api.queues``)
reaches it through ``Queueing``. Every change is written to the store first (through the
one store writer) and applied in memory only once durable. The ``default`` queue (no
quotas) always exists: it is created at start when missing and cannot be deleted.
"""

from __future__ import annotations

from dataclasses import replace

from fuyao.errors import Conflict, InvalidInput, NotFound
from fuyao.queues import DEFAULT_QUEUE, QueueSpec, QueueUpdate
from hub.queueing.quota import QueueState
from hub.store import QueueRecord
from hub.writer import StoreWriter

MAX_QUEUES = 1000


def _text(value: object) -> str:
    return str(value).strip()


def record_of(spec: QueueSpec) -> QueueRecord:
    """A queue record from a validated spec (quantities kept as written)."""
    return QueueRecord(
        spec.name, spec.priority, spec.weight,
        {r: _text(q) for r, q in spec.quotas.items()},
        {c: {r: _text(q) for r, q in m.items()} for c, m in spec.cluster_quotas.items()},
        {r: _text(q) for r, q in spec.borrow.items()},
    )


class QueueBook:
    """Every queue, by name, as stored."""

    def __init__(self, writer: StoreWriter) -> None:
        self.writer = writer
        self.records: dict[str, QueueRecord] = {}
        self.states: dict[str, QueueState] = {}

    async def load(self) -> None:
        """Read every queue; create ``default`` if the store has none by that name."""
        for rec in await self.writer.read(self.writer.store.list_queues):
            self._keep(rec)
        if DEFAULT_QUEUE not in self.records:
            rec = await self.writer.call(self.writer.store.put_queue,
                                         QueueRecord(DEFAULT_QUEUE), create=True)
            self._keep(rec)

    def _keep(self, rec: QueueRecord) -> None:
        self.records[rec.name] = rec
        self.states[rec.name] = QueueState.from_record(rec)

    def get(self, name: str) -> QueueRecord:
        """One queue, or NotFound."""
        rec = self.records.get(name)
        if rec is None:
            raise NotFound(f"queue {name} not found")
        return rec

    async def create(self, spec: QueueSpec) -> QueueRecord:
        """Store a new queue; Conflict if the name is taken."""
        if spec.name in self.records:
            raise Conflict(f"queue {spec.name} already exists")
        if len(self.records) >= MAX_QUEUES:
            raise InvalidInput(f"at most {MAX_QUEUES} queues")
        rec = await self.writer.call(self.writer.store.put_queue, record_of(spec), create=True)
        self._keep(rec)
        return rec

    async def update(self, name: str, change: QueueUpdate) -> QueueRecord:
        """Change some fields of a queue; the maps given replace the old ones."""
        old = self.get(name)
        fields = change.model_dump(exclude_none=True)
        spec = QueueSpec.model_validate({
            "name": name, "priority": old.priority, "weight": old.weight,
            "quotas": old.quotas, "cluster_quotas": old.cluster_quotas, "borrow": old.borrow,
            **fields,
        })
        rec = replace(record_of(spec), created_at=old.created_at)
        rec = await self.writer.call(self.writer.store.put_queue, rec, create=False)
        self._keep(rec)
        return rec

    async def delete(self, name: str, tasks: list[str]) -> None:
        """Delete a queue that holds no active task (``tasks``: the names of those it holds)."""
        self.get(name)
        if name == DEFAULT_QUEUE:
            raise Conflict("queue default cannot be deleted: tasks without a queue go there")
        if tasks:
            shown = ", ".join(tasks[:20]) + (f" and {len(tasks) - 20} more"
                                             if len(tasks) > 20 else "")
            raise Conflict(f"queue {name} still has {len(tasks)} task(s) that have not "
                           f"ended: {shown}; cancel them or wait for them to finish")
        await self.writer.call(self.writer.store.delete_queue, name)
        del self.records[name]
        del self.states[name]
