"""The actor of the operation being served: who (token name and role), from where, which
request. Audit records carry it.

``hub.auth.guard`` sets ``CURRENT`` for each REST request; anything that runs outside a
request (the monitor, retention, the placement loop) sees the default ``SYSTEM``; the agent
channel passes its own ``Actor`` explicitly. ``Hub.audit`` reads it, so operations need not
pass it along.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from fuyao.identity import Role
from hub.store.records import AuditRecord


@dataclass(frozen=True)
class Identity:
    """A verified bearer token (or the open hub's stand-in)."""

    name: str
    role: Role
    queues: tuple[str, ...] = ()
    token_id: str | None = None

    def may_use_queue(self, queue: str) -> bool:
        """Submitters are limited to their queues; every other role is not scoped."""
        return self.role != Role.SUBMITTER or queue in self.queues


@dataclass(frozen=True)
class Actor:
    """Who does something, as audited."""

    name: str
    role: str = ""
    source: str = ""
    request_id: str = ""
    identity: Identity | None = field(default=None, compare=False)

    def record(self, action: str, target: str, result: str) -> AuditRecord:
        """The audit row for ``action`` on ``target`` with ``result``."""
        return AuditRecord(actor=self.name, action=action, target=target, result=result,
                           role=self.role, source=self.source, request_id=self.request_id)


class AuditNotes(list[str]):
    """What ``Hub.audited`` yields to its block: notes to append to the ``ok`` result, and
    ``claim()``, which hands the block that ``ok`` record to write in the mutation's own
    store transaction (the change and its audit commit together, in one write); ``audited``
    then writes no ``ok`` of its own. Claim it for the block's last step, the write that
    commits the change: if that write fails, it rolls back with the record and ``audited``
    records the refusal as for any block that raises."""

    def __init__(self, actor: Actor, action: str, target: str) -> None:
        super().__init__()
        self.actor, self.action, self.target = actor, action, target
        self.claimed = False

    def success(self) -> AuditRecord:
        """The ``ok`` record with the notes appended so far."""
        return self.actor.record(self.action, self.target, ", ".join(["ok", *self]))

    def claim(self) -> AuditRecord:
        """The ``ok`` record, for the block to store itself: ``audited`` will not."""
        self.claimed = True
        return self.success()


SYSTEM = Actor("system")
OPEN_HUB = Identity("anonymous", Role.ADMIN)   # --auth none: every caller is admin
CURRENT: ContextVar[Actor] = ContextVar("fuyao_actor", default=SYSTEM)


def agent_actor(cluster: str, source: str = "") -> Actor:
    """The actor for what a cluster's agent does."""
    return Actor(f"agent:{cluster}" if cluster else "agent", "agent", source)
