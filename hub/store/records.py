"""Plain records the store takes and returns: frozen dataclasses, never ORM objects.

Every caller of ``hub.store.Store`` (the hub's REST handlers, the placement loop, the agent
channel) speaks these types, so no SQLAlchemy session state ever leaks out of the store.
Datetimes are timezone-aware UTC, in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TASK_UPDATE_FIELDS = frozenset(
    {"state", "cluster", "node", "generation", "message", "reasons", "scores", "updated_at"}
)
CLUSTER_UPDATE_FIELDS = frozenset(
    {"state", "labels", "weight", "headroom", "cordoned", "created_at", "last_heartbeat",
     "backend", "taints"}
)


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """A member cluster as stored."""

    name: str
    state: str
    labels: dict[str, str]
    weight: int
    headroom: float
    cordoned: bool
    created_at: datetime
    last_heartbeat: datetime | None = None
    backend: str | None = None
    taints: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task as stored; ``seq`` is its submission order, assigned by the store."""

    id: str
    name: str
    spec: dict[str, Any]
    state: str
    queue: str
    priority: int
    seq: int
    created_at: datetime
    updated_at: datetime
    cluster: str | None = None
    node: str | None = None
    generation: int = 0
    message: str = ""
    reasons: dict[str, str] = field(default_factory=dict)
    scores: list[Any] = field(default_factory=list)   # the form ``hub.scorerows`` writes
    owner: str = ""
    parent: str | None = None     # the divided task this is one cluster's part of


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One line of a task's timeline."""

    task_id: str
    at: datetime
    kind: str
    message: str
    cluster: str | None = None
    generation: int = 0


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """A partial update of one task: only the fields in ``changes`` are written.

    Keys are among ``TASK_UPDATE_FIELDS``; ``updated_at`` is written only if given.
    """

    task_id: str
    changes: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PlacementRecord:
    """One delegation of a task to a cluster, at one generation."""

    task_id: str
    cluster: str
    generation: int
    at: datetime
    nodes: list[str]


@dataclass(frozen=True, slots=True)
class ApiTokenRecord:
    """A REST bearer token as stored: only its salted slow hash, never the token."""

    id: str
    name: str
    token_hash: str
    role: str
    queues: list[str]
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JoinTokenRecord:
    """A join token as stored (``id`` is a prefix of its hash, safe to show)."""

    id: str
    cluster: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AgentCertificateRecord:
    """A client certificate the hub's CA issued to a cluster's agent, by serial (hex)."""

    serial: str
    cluster: str
    issued_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One audit row."""

    actor: str
    action: str
    target: str
    result: str
    role: str = ""
    source: str = ""
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class NewTasks:
    """One submit's new tasks as the store writes them: the tasks, their events and the
    submit's audit record (``Store.add_tasks``; several in one transaction: ``Store.write``)."""

    tasks: Sequence[TaskRecord]
    events: Sequence[EventRecord]
    audit: AuditRecord | None = None
