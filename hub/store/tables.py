"""SQLModel tables: the store's current schema, as the ``Store`` queries it.

Only ``hub.store`` imports this module; everything outside the store sees records
(``hub.store.records``). The schema in the database is created by the migrations
(``hub.store.migrations``), never by ``create_all`` on these models: a test checks that the
two agree, so a model change without a migration fails CI.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Dialect, Index, Integer, Table, Text
from sqlalchemy.types import DateTime, TypeDecorator
from sqlmodel import Field, SQLModel


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops tzinfo)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite, ``sqlite_text`` in place of this type's step and the dialect's DATETIME
        step composed - the same text, when a probe shows the dialect writes it as
        SQLAlchemy's default storage format does; otherwise, and elsewhere, the composed
        steps as ever."""
        composed = super().bind_processor(dialect)
        if dialect.name != "sqlite" or composed is None:
            return composed
        return sqlite_text if composed(_PROBE) == sqlite_text(_PROBE) else composed


_PROBE = datetime(2024, 2, 29, 23, 59, 58, 7, tzinfo=UTC)


def sqlite_text(value: datetime | None) -> str | None:
    """The text SQLite stores for a timestamp: its UTC time as ``YYYY-MM-DD HH:MM:SS.ffffff``
    (a naive one taken as UTC), what SQLAlchemy's DATETIME writes by default, in one C call
    where SQLAlchemy takes two Python steps and a ``%`` format: every task update, event and
    placement binds one, and at 100 members the store writer spent ~6% of the hub's samples
    on them. Held equal to SQLAlchemy's by ``tests/store/test_timestamps.py``."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]   # the "+00:00" cut off


def _ts(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable, index=index)


def _json(default_factory: Any) -> Any:
    return Field(default_factory=default_factory, sa_type=JSON, nullable=False)


def _text() -> Any:
    return Field(default="", sa_type=Text, nullable=False)


def _label() -> Any:
    return Field(default="", nullable=False, sa_column_kwargs={"server_default": ""})


def _serial() -> Any:
    """An auto-increment primary key (a rowid alias on SQLite, BIGINT identity elsewhere)."""
    kind = BigInteger().with_variant(Integer, "sqlite")
    return Field(default=None, sa_column=Column(kind, primary_key=True, autoincrement=True))


class ClusterRow(SQLModel, table=True):
    """A member cluster."""

    __tablename__ = "clusters"

    name: str = Field(primary_key=True)
    state: str
    labels: dict[str, str] = _json(dict)
    weight: int
    headroom: float
    cordoned: bool = False
    created_at: datetime = _ts()
    last_heartbeat: datetime | None = _ts(nullable=True)
    backend: str | None = None
    taints: list[dict[str, str]] = _json(list)                # [{key, value, effect}]


class JoinTokenRow(SQLModel, table=True):
    """A one-time join token, stored only as its hash."""

    __tablename__ = "join_tokens"

    token_hash: str = Field(primary_key=True)
    cluster: str = Field(foreign_key="clusters.name", ondelete="CASCADE", index=True)
    created_at: datetime = _ts()
    expires_at: datetime = _ts()
    used_at: datetime | None = _ts(nullable=True)


class CredentialRow(SQLModel, table=True):
    """The hash of a cluster's agent credential (at most one per cluster)."""

    __tablename__ = "cluster_credentials"

    cluster: str = Field(primary_key=True, foreign_key="clusters.name", ondelete="CASCADE")
    credential_hash: str = Field(unique=True)
    created_at: datetime = _ts()


class TaskRow(SQLModel, table=True):
    """A task; ``seq`` (the primary key) is its submission order."""

    __tablename__ = "tasks"
    __table_args__ = {"sqlite_autoincrement": True}

    seq: int | None = _serial()
    id: str = Field(unique=True)
    name: str = Field(unique=True)
    spec: dict[str, Any] = _json(dict)
    state: str = Field(index=True)
    queue: str = Field(index=True)
    priority: int
    cluster: str | None = Field(default=None, index=True)
    node: str | None = None
    generation: int = 0
    message: str = _text()
    reasons: dict[str, str] = _json(dict)
    scores: list[Any] = _json(list)
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    owner: str = _label()                   # the API token that submitted it ('' before auth)
    parent: str | None = Field(default=None, index=True)   # a divided task's id, for its parts


class PlacementRow(SQLModel, table=True):
    """One delegation of a task to a cluster at one generation."""

    __tablename__ = "placements"

    id: int | None = _serial()
    task_id: str = Field(foreign_key="tasks.id", ondelete="CASCADE", index=True)
    cluster: str
    generation: int
    at: datetime = _ts()
    nodes: list[str] = _json(list)


class TaskEventRow(SQLModel, table=True):
    """One line of a task's timeline; ``id`` breaks ties between equal timestamps."""

    __tablename__ = "task_events"

    id: int | None = _serial()
    task_id: str = Field(foreign_key="tasks.id", ondelete="CASCADE", index=True)
    at: datetime = _ts()
    kind: str
    message: str = _text()
    cluster: str | None = None
    generation: int = 0


class AuditRow(SQLModel, table=True):
    """One audited mutation: who did what to which target, when, and the result."""

    __tablename__ = "audit_log"

    id: int | None = _serial()
    at: datetime = _ts(index=True)
    actor: str
    action: str
    target: str
    result: str
    role: str = _label()          # the actor's role ('' for system and agents)
    source: str = _label()        # client address
    request_id: str = _label()    # X-Request-Id of the REST call


class QueueRow(SQLModel, table=True):
    """A task queue: priority level, fair-share weight and resource quotas."""

    __tablename__ = "queues"

    name: str = Field(primary_key=True)
    priority: int = 0
    weight: int = 1
    quotas: dict[str, str] = _json(dict)                      # resource -> quantity
    cluster_quotas: dict[str, dict[str, str]] = _json(dict)   # cluster -> resource -> qty
    created_at: datetime = _ts()
    borrow: dict[str, str] = _json(dict)                      # resource -> quantity
    updated_at: datetime = _ts()


class ProfileRow(SQLModel, table=True):
    """A ComputeProfile: a named selector plus scheduling defaults."""

    __tablename__ = "profiles"

    name: str = Field(primary_key=True)
    selector: str = _text()
    priority: int | None = None
    preemptible: bool = False
    gang: bool = False
    defaults: dict[str, Any] = _json(dict)                    # further TaskSpec defaults
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class ApiTokenRow(SQLModel, table=True):
    """A REST bearer token, stored only as its hash, with a role and queue scope."""

    __tablename__ = "api_tokens"

    id: str = Field(primary_key=True)
    name: str = Field(unique=True)
    token_hash: str = Field(unique=True)
    role: str                                                 # admin|operator|submitter|viewer
    queues: list[str] = _json(list)                           # submitter scope; empty = all
    created_at: datetime = _ts()
    expires_at: datetime | None = _ts(nullable=True)
    revoked_at: datetime | None = _ts(nullable=True)
    last_used_at: datetime | None = _ts(nullable=True)


class CapacitySampleRow(SQLModel, table=True):
    """One cluster x accelerator-model capacity row at one time (a ``CapacityRow`` sample)."""

    __tablename__ = "capacity_samples"
    __table_args__ = (Index("ix_capacity_samples_cluster_at", "cluster", "at"),)

    id: int | None = _serial()
    at: datetime = _ts(index=True)
    cluster: str
    model: str
    nodes: int = 0
    devices_total: int = 0
    devices_allocated: float = 0.0
    devices_reserved: float = 0.0
    devices_free: float = 0.0
    cpu_total: float = 0.0
    cpu_allocated: float = 0.0
    cpu_reserved: float = 0.0
    cpu_free: float = 0.0
    memory_total_gib: float = 0.0
    memory_allocated_gib: float = 0.0
    memory_reserved_gib: float = 0.0
    memory_free_gib: float = 0.0
    devices_unschedulable: float = 0.0   # since schema 2
    devices_fragmented: float = 0.0
    queued_tasks: float = 0.0
    queued_devices: float = 0.0


class LeaderRow(SQLModel, table=True):
    """The leader lease's one row (id 1): the fencing epoch and who won it (``hub.ha``)."""

    __tablename__ = "ha_leader"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    epoch: int = Field(sa_type=BigInteger, nullable=False)
    holder: str | None = None
    api_address: str | None = None
    agent_address: str | None = None
    acquired_at: datetime | None = _ts(nullable=True)


class ReplicaRow(SQLModel, table=True):
    """One running hub process, as it last reported itself (``hub status``)."""

    __tablename__ = "ha_replicas"

    id: str = Field(primary_key=True)
    api_address: str
    agent_address: str
    health_address: str
    role: str                                                 # leader | standby
    epoch: int = Field(sa_type=BigInteger, nullable=False)
    started_at: datetime = _ts()
    seen_at: datetime = _ts()


class PkiRow(SQLModel, table=True):
    """The agent CA every hub replica on this database serves with (one row, id 1)."""

    __tablename__ = "ha_pki"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    ca_cert: str = _text()
    ca_key: str = _text()
    created_at: datetime = _ts()


class AgentCertificateRow(SQLModel, table=True):
    """A client certificate the hub's CA issued to a cluster's agent (for revocation)."""

    __tablename__ = "agent_certificates"

    serial: str = Field(primary_key=True)
    cluster: str = Field(index=True)
    issued_at: datetime = _ts()
    expires_at: datetime = _ts()
    revoked_at: datetime | None = _ts(nullable=True)


TABLES: dict[str, Table] = {
    name: SQLModel.metadata.tables[name]
    for name in ("clusters", "join_tokens", "cluster_credentials", "tasks", "placements",
                 "task_events", "audit_log", "queues", "profiles", "api_tokens",
                 "capacity_samples", "ha_leader", "ha_replicas", "ha_pki",
                 "agent_certificates")
}
"""The store's tables by name (Core ``Table`` objects, for bulk statements and tests)."""
