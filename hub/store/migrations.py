"""Schema migrations: an ordered list, applied by ``Store.migrate`` on every hub start.

The ``schema_version`` table records each applied migration (version, name, time); the
schema version is the highest one. Each migration is written as explicit table definitions
frozen inside it, so a later change to the models (``hub.store.tables``) never changes what
an old migration does: a model change needs a new migration appended to ``MIGRATIONS``.

Migrations run in one transaction that first takes the database's write lock (SQLite
``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so two hubs starting together apply each
migration once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from fuyao.errors import FuyaoError

ADVISORY_LOCK_KEY = 0x66757961  # "fuya": serializes migrate() across PostgreSQL clients

_version_meta = sa.MetaData()
SCHEMA_VERSION = sa.Table(
    "schema_version",
    _version_meta,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``upgrade`` runs inside the migration transaction."""

    version: int
    name: str
    upgrade: Callable[[Connection], None]


def _serial() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer, "sqlite")


def _ts(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _initial_schema(conn: Connection) -> None:
    """Migration 1: every table of the first release. Frozen: never edit, append instead."""
    m = sa.MetaData()
    s, j, i, f, t = sa.String, sa.JSON, sa.Integer, sa.Float, sa.Text

    def req(name: str, kind: type[sa.types.TypeEngine[Any]]) -> sa.Column[Any]:
        return sa.Column(name, kind(), nullable=False)

    def opt(name: str, kind: type[sa.types.TypeEngine[Any]]) -> sa.Column[Any]:
        return sa.Column(name, kind(), nullable=True)

    sa.Table(
        "clusters", m,
        sa.Column("name", s, primary_key=True),
        req("state", s), req("labels", j), req("weight", i), req("headroom", f),
        req("cordoned", sa.Boolean), _ts("created_at"), _ts("last_heartbeat", True),
        opt("backend", s),
    )
    sa.Table(
        "join_tokens", m,
        sa.Column("token_hash", s, primary_key=True),
        sa.Column("cluster", s, sa.ForeignKey("clusters.name", ondelete="CASCADE"),
                  nullable=False),
        _ts("created_at"), _ts("expires_at"), _ts("used_at", True),
        sa.Index("ix_join_tokens_cluster", "cluster"),
    )
    sa.Table(
        "cluster_credentials", m,
        sa.Column("cluster", s, sa.ForeignKey("clusters.name", ondelete="CASCADE"),
                  primary_key=True),
        req("credential_hash", s), _ts("created_at"),
        sa.UniqueConstraint("credential_hash", name="uq_cluster_credentials_hash"),
    )
    sa.Table(
        "tasks", m,
        sa.Column("seq", _serial(), primary_key=True, autoincrement=True),
        req("id", s), req("name", s), req("spec", j), req("state", s), req("queue", s),
        req("priority", i), opt("cluster", s), opt("node", s), req("generation", i),
        req("message", t), req("reasons", j), req("scores", j),
        _ts("created_at"), _ts("updated_at"),
        sa.UniqueConstraint("id", name="uq_tasks_id"),
        sa.UniqueConstraint("name", name="uq_tasks_name"),
        sa.Index("ix_tasks_state", "state"),
        sa.Index("ix_tasks_queue", "queue"),
        sa.Index("ix_tasks_cluster", "cluster"),
        sqlite_autoincrement=True,
    )
    for name, extra in (
        ("placements", [req("cluster", s), req("generation", i), _ts("at"), req("nodes", j)]),
        ("task_events", [_ts("at"), req("kind", s), req("message", t), opt("cluster", s),
                         req("generation", i)]),
    ):
        sa.Table(
            name, m,
            sa.Column("id", _serial(), primary_key=True, autoincrement=True),
            sa.Column("task_id", s, sa.ForeignKey("tasks.id", ondelete="CASCADE"),
                      nullable=False),
            *extra,
            sa.Index(f"ix_{name}_task_id", "task_id"),
        )
    sa.Table(
        "audit_log", m,
        sa.Column("id", _serial(), primary_key=True, autoincrement=True),
        _ts("at"), req("actor", s), req("action", s), req("target", s), req("result", s),
        sa.Index("ix_audit_log_at", "at"),
    )
    sa.Table(
        "queues", m,
        sa.Column("name", s, primary_key=True),
        req("priority", i), req("weight", i), req("quotas", j), req("cluster_quotas", j),
        _ts("created_at"), _ts("updated_at"),
    )
    sa.Table(
        "profiles", m,
        sa.Column("name", s, primary_key=True),
        req("selector", t), opt("priority", i), req("preemptible", sa.Boolean),
        req("gang", sa.Boolean), req("defaults", j), _ts("created_at"), _ts("updated_at"),
    )
    sa.Table(
        "api_tokens", m,
        sa.Column("id", s, primary_key=True),
        req("name", s), req("token_hash", s), req("role", s), req("queues", j),
        _ts("created_at"), _ts("expires_at", True), _ts("revoked_at", True),
        _ts("last_used_at", True),
        sa.UniqueConstraint("name", name="uq_api_tokens_name"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    sa.Table(
        "capacity_samples", m,
        sa.Column("id", _serial(), primary_key=True, autoincrement=True),
        _ts("at"), req("cluster", s), req("model", s), req("nodes", i),
        req("devices_total", i), req("devices_allocated", f), req("devices_reserved", f),
        req("devices_free", f), req("cpu_total", f), req("cpu_allocated", f),
        req("cpu_reserved", f), req("cpu_free", f), req("memory_total_gib", f),
        req("memory_allocated_gib", f), req("memory_reserved_gib", f), req("memory_free_gib", f),
        sa.Index("ix_capacity_samples_at", "at"),
        sa.Index("ix_capacity_samples_cluster_at", "cluster", "at"),
    )
    m.create_all(conn)


def _queue_borrow(conn: Connection) -> None:
    """Migration 2: a queue's borrow limits (resource -> quantity). Frozen."""
    conn.execute(sa.text("ALTER TABLE queues ADD COLUMN borrow JSON NOT NULL DEFAULT '{}'"))


def _cluster_taints(conn: Connection) -> None:
    """Migration 5: a cluster's taints (``[{key, value, effect}]``). Frozen."""
    conn.execute(sa.text("ALTER TABLE clusters ADD COLUMN taints JSON NOT NULL DEFAULT '[]'"))


def _leader_lease(conn: Connection) -> None:
    """Migration 3: the leader lease's epoch row, the replica registry and the CA the hub
    replicas share (``hub.ha``). Frozen: never edit, append instead."""
    m = sa.MetaData()
    s, t = sa.String, sa.Text
    leader = sa.Table(
        "ha_leader", m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("holder", s, nullable=True),
        sa.Column("api_address", s, nullable=True),
        sa.Column("agent_address", s, nullable=True),
        _ts("acquired_at", True),
    )
    sa.Table(
        "ha_replicas", m,
        sa.Column("id", s, primary_key=True),
        sa.Column("api_address", s, nullable=False),
        sa.Column("agent_address", s, nullable=False),
        sa.Column("health_address", s, nullable=False),
        sa.Column("role", s, nullable=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        _ts("started_at"), _ts("seen_at"),
    )
    sa.Table(
        "ha_pki", m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("ca_cert", t, nullable=False),
        sa.Column("ca_key", t, nullable=False),
        _ts("created_at"),
    )
    m.create_all(conn)
    conn.execute(leader.insert().values(id=1, epoch=0))


def _capacity_demand(conn: Connection) -> None:
    """Migration 4: capacity samples also record unschedulable and fragmented devices and
    queued demand (``hub.planning.history``). Frozen: never edit, append instead."""
    for name in ("devices_unschedulable", "devices_fragmented", "queued_tasks",
                 "queued_devices"):
        conn.execute(sa.text(
            f"ALTER TABLE capacity_samples ADD COLUMN {name} FLOAT NOT NULL DEFAULT 0"))


def _identities(conn: Connection) -> None:
    """Migration 5: who did it (audit role, source address, request id), who owns a task,
    and the agent client certificates the hub issued. Frozen: never edit, append instead."""
    for table, column in (("tasks", "owner"), ("audit_log", "role"), ("audit_log", "source"),
                          ("audit_log", "request_id")):
        conn.execute(sa.text(
            f"ALTER TABLE {table} ADD COLUMN {column} VARCHAR NOT NULL DEFAULT ''"))
    m = sa.MetaData()
    sa.Table(
        "agent_certificates", m,
        sa.Column("serial", sa.String, primary_key=True),
        sa.Column("cluster", sa.String, nullable=False),
        _ts("issued_at"), _ts("expires_at"), _ts("revoked_at", True),
        sa.Index("ix_agent_certificates_cluster", "cluster"),
    )
    m.create_all(conn)


def _task_parts(conn: Connection) -> None:
    """Migration 7: a task divided across clusters has one part per cluster, each a task of
    its own whose ``parent`` is the divided task's id (``hub.division``). Frozen."""
    conn.execute(sa.text("ALTER TABLE tasks ADD COLUMN parent VARCHAR NULL"))
    conn.execute(sa.text("CREATE INDEX ix_tasks_parent ON tasks (parent)"))


def _compact_scores(conn: Connection) -> None:
    """Migration 8: no DDL. From here a task's ``scores`` are written in the compact form
    (``hub.scorerows``: the plugin names once, a short row per cluster); rows written before
    stay as they are and are read in either form. The version moves so that an older hub,
    which reads only the old form, refuses this store ("upgrade the hub") instead of
    failing on the first new row it shows. Frozen."""
    del conn


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _initial_schema),
    Migration(2, "queue borrow limits", _queue_borrow),
    Migration(3, "leader lease, replicas, shared CA", _leader_lease),
    Migration(4, "capacity samples: unschedulable, fragmented, queued demand", _capacity_demand),
    Migration(5, "cluster taints", _cluster_taints),
    Migration(6, "identities: audit actor details, task owner, agent certificates", _identities),
    Migration(7, "task parts: a divided task's parent", _task_parts),
    Migration(8, "task scores stored compact (no DDL)", _compact_scores),
)
LATEST_VERSION = MIGRATIONS[-1].version


def current_version(conn: Connection) -> int:
    """The highest applied migration, 0 for an empty database."""
    if not sa.inspect(conn).has_table(SCHEMA_VERSION.name):
        return 0
    found = conn.execute(sa.select(sa.func.max(SCHEMA_VERSION.c.version))).scalar()
    return int(found or 0)


def run_migrations(conn: Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the pending ``migrations`` on ``conn`` (inside its open write transaction)."""
    _check_order(migrations)
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK_KEY)))
    SCHEMA_VERSION.create(conn, checkfirst=True)
    version = current_version(conn)
    known = migrations[-1].version if migrations else 0
    if version > known:
        raise FuyaoError(
            f"the database schema is at version {version}, newer than this hub knows "
            f"({known}): upgrade the hub"
        )
    for migration in migrations:
        if migration.version > version:
            migration.upgrade(conn)
            conn.execute(SCHEMA_VERSION.insert().values(
                version=migration.version, name=migration.name, applied_at=datetime.now(UTC),
            ))
            version = migration.version
    return version


def _check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1, 2, 3, ... in order, got {versions}")
