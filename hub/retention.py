"""Deleting ended tasks: one at a time by a user (``task delete``), and by age (retention).

``Retention.delete`` is what ``DELETE /api/v1/tasks/{name}`` calls: only a task that has
ended (Succeeded, Failed, Cancelled) can be deleted, which frees its name; its timeline and
placements go with it, the audit log keeps the deletion. ``Retention.run`` is a hub loop
that deletes tasks ended longer than ``retain_ended`` ago, in batches, audited as
``system``. Neither ever touches a task that has not ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from fuyao.errors import Conflict
from fuyao.spec import TaskState
from hub.auth.actor import SYSTEM, Actor
from hub.taskbook import TaskBook
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

ENDED = [s.value for s in TaskState if s.terminal]
BATCH = 500

Audit = Callable[[str, str, str, Actor], Awaitable[None]]


class Retention:
    """Task deletion, by request and by age."""

    def __init__(self, writer: StoreWriter, tasks: TaskBook, retain_seconds: float,
                 audit: Audit) -> None:
        self.writer = writer
        self.tasks = tasks
        self.retain_seconds = retain_seconds
        self.audit = audit

    async def delete(self, name: str) -> dict[str, str]:
        """Delete an ended task (Conflict if it has not ended, NotFound if absent)."""
        active = self.tasks.by_name(name)
        if active is not None:
            raise Conflict(f"task {name} is {active.state.value}: cancel it first, then "
                           "delete it")
        store = self.writer.store
        deleted = await self.writer.call(store.delete_tasks, [name], ENDED)
        if not deleted:
            rec = await self.writer.read(store.get_task, name)   # NotFound if absent
            raise Conflict(f"task {name} is {rec.state}: only an ended task can be deleted")
        return {"deleted": name}

    async def sweep(self, now: datetime | None = None) -> int:
        """Delete tasks ended more than ``retain_seconds`` ago; returns how many."""
        if self.retain_seconds <= 0:
            return 0
        cutoff = (now or datetime.now(UTC)) - timedelta(seconds=self.retain_seconds)
        store = self.writer.store
        total = 0
        while True:
            names = await self.writer.read(store.ended_before, ENDED, cutoff, BATCH)
            if not names:
                return total
            deleted = await self.writer.call(store.delete_tasks, names, ENDED)
            total += len(deleted)
            shown = ",".join(deleted[:20]) + ("..." if len(deleted) > 20 else "")
            await self.audit("task.delete", shown,
                             f"ok, retention: {len(deleted)} task(s) ended before "
                             f"{cutoff.isoformat(timespec='seconds')}", SYSTEM)
            if len(names) < BATCH:
                return total

    async def run(self) -> None:
        """Sweep forever, every tenth of the retention period (at most hourly)."""
        if self.retain_seconds <= 0:
            return
        interval = min(3600.0, max(1.0, self.retain_seconds / 10))
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("retention sweep failed")
            await asyncio.sleep(interval)
