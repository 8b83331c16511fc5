"""The hub's store: clusters, join tokens, credentials, tasks, events, placements, audit.

The hub creates one ``Store`` at start (``Store(url).migrate()``) and calls it from one writer
thread (``hub.writer.StoreWriter``) for writes and from reader threads for reads. Every write
method is one transaction: it either commits all it was given or changes nothing. Records
(``hub.store.records``) go in and come out; rows and sessions never leave this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlmodel import Session, col, select

from fuyao.errors import Conflict, FuyaoError, NotFound, Unauthenticated
from hub.store import convert
from hub.store.bulk import BulkWriter
from hub.store.engine import (
    DEFAULT_BUSY_TIMEOUT_S,
    WRITE_OPTION,
    create_engine,
    parse_url,
    wrap_errors,
)
from hub.store.identity import AUDIT, IdentityStore, audit_values
from hub.store.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    current_version,
    run_migrations,
)
from hub.store.queue_rows import QueueRows
from hub.store.records import (
    CLUSTER_UPDATE_FIELDS,
    TASK_UPDATE_FIELDS,
    AuditRecord,
    ClusterRecord,
    EventRecord,
    NewTasks,
    PlacementRecord,
    TaskRecord,
    TaskUpdate,
)
from hub.store.tables import (
    TABLES,
    ClusterRow,
    CredentialRow,
    JoinTokenRow,
    PlacementRow,
    TaskEventRow,
    TaskRow,
)

T = TypeVar("T")
Fence = Callable[[Connection], None]
_CHUNK = 500   # ids per IN (...) query
TASKS, EVENTS, PLACEMENTS = TABLES["tasks"], TABLES["task_events"], TABLES["placements"]
_UPDATE_TASK = sa.update(TASKS).where(TASKS.c.id == sa.bindparam("_task_id"))
# ``write``'s statements, built once: the writer runs one ``write`` a commit, where building
# them anew was a few percent of a small transaction's CPU.
_INSERT_EVENTS, _INSERT_PLACEMENTS = sa.insert(EVENTS), sa.insert(PLACEMENTS)
_INSERT_AUDIT = sa.insert(AUDIT)
JOIN_TOKENS, CREDENTIALS = TABLES["join_tokens"], TABLES["cluster_credentials"]


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


class Store(IdentityStore, QueueRows):
    """The hub's persistent state on SQLite (default) or PostgreSQL."""

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = parse_url(url)
        self.backend = self.url.get_backend_name()   # "sqlite" or "postgresql"
        self._engine = create_engine(self.url, busy_timeout_s)
        self._expected_version = LATEST_VERSION
        self._schema_ok = False
        self._bulk = BulkWriter()   # the many-row statements of ``apply``, compiled once
        # Run at the start of every write transaction (``hub.ha`` sets the leader's epoch
        # check here): it raises to refuse the write, so a deposed leader writes nothing.
        self.fence: Fence | None = None
        # Told, from the writer thread, of the task events of every committed transaction
        # with the names of tasks it added (``hub.events`` publishes them).
        self.on_events: Callable[[Sequence[EventRecord], Mapping[str, str]], None] | None = None

    def __repr__(self) -> str:
        return f"Store({self.url.render_as_string(hide_password=True)!r})"

    # ---- lifecycle

    def migrate(self, migrations: Sequence[Migration] = MIGRATIONS) -> int:
        """Apply pending migrations and return the schema version; safe on every start."""
        with wrap_errors("migrate"), self._engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                version = run_migrations(conn, migrations)
        self._expected_version = version
        self._schema_ok = True
        return version

    def schema_version(self) -> int:
        """The highest migration applied to the database (0 if none)."""
        with wrap_errors("read schema version"), self._engine.connect() as conn:
            return current_version(conn)

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def _check_schema(self) -> None:
        if self._schema_ok:
            return
        version = self.schema_version()
        if version != self._expected_version:
            raise FuyaoError(
                f"the store schema is at version {version} but this hub needs "
                f"{self._expected_version}: run migrate() (fuyao-hub does on start)"
            )
        self._schema_ok = True

    @contextmanager
    def _read(self, what: str) -> Iterator[Session]:
        self._check_schema()
        with wrap_errors(what), Session(self._engine) as session:
            yield session

    @contextmanager
    def _write(self, what: str) -> Iterator[Session]:
        self._check_schema()
        with wrap_errors(what), Session(self._engine) as session:
            conn = session.connection(execution_options={WRITE_OPTION: True})
            if self.fence is not None:
                self.fence(conn)
            yield session
            session.commit()

    @contextmanager
    def _write_rows(self, what: str) -> Iterator[Connection]:
        """A write transaction on a bare connection, for Core statements only: ``write``'s,
        which the writer thread runs for every submit and placement commit. An ORM session
        around it cost ~0.6 ms of CPU a transaction (its setup, commit and one audit row's
        unit of work), about half of a one-task submit's (``docs/benchmarks.md``, e2e
        section, "Twenty-second pass")."""
        self._check_schema()
        with wrap_errors(what), self._engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if self.fence is not None:
                    self.fence(conn)
                yield conn

    # ---- clusters

    def create_cluster(self, rec: ClusterRecord) -> None:
        """Store a new cluster; Conflict if the name is taken."""
        values = convert.cluster_values(rec)
        with self._write(f"create cluster {rec.name}") as s:
            if s.get(ClusterRow, rec.name) is not None:
                raise Conflict(f"cluster {rec.name} already exists")
            s.add(ClusterRow(**values))

    def get_cluster(self, name: str) -> ClusterRecord:
        """One cluster; NotFound if absent."""
        with self._read(f"get cluster {name}") as s:
            return convert.cluster_record(self._cluster_row(s, name))

    def list_clusters(self) -> list[ClusterRecord]:
        """Every cluster, by name."""
        with self._read("list clusters") as s:
            rows = s.exec(select(ClusterRow).order_by(col(ClusterRow.name))).all()
            return [convert.cluster_record(r) for r in rows]

    def update_cluster(self, name: str, /, **changes: Any) -> ClusterRecord:
        """Change some fields of a cluster (any but ``name``) and return it."""
        convert.check_keys(changes, CLUSTER_UPDATE_FIELDS, "cluster")
        values = convert.normalize_times(changes, ("created_at", "last_heartbeat"))
        with self._write(f"update cluster {name}") as s:
            row = self._cluster_row(s, name)
            for key, value in values.items():
                setattr(row, key, value)
            s.flush()
            return convert.cluster_record(row)

    def touch_clusters(self, names: Sequence[str], at: datetime) -> None:
        """Set ``last_heartbeat`` of the named clusters (those that exist) in one write: the
        monitor's periodic save made one transaction per cluster, 100 fsyncs at 100 members."""
        if not names:
            return
        when = convert.utc_or_none(at, "last_heartbeat")
        with self._write("save heartbeats") as s:
            s.connection().execute(
                sa.update(ClusterRow.__table__)  # type: ignore[attr-defined]
                .where(col(ClusterRow.name).in_(list(names)))
                .values(last_heartbeat=when))

    def delete_cluster(self, name: str) -> None:
        """Delete a cluster with its join tokens and credential; its tasks keep their history."""
        with self._write(f"delete cluster {name}") as s:
            row = self._cluster_row(s, name)
            conn = s.connection()
            conn.execute(sa.delete(JOIN_TOKENS).where(JOIN_TOKENS.c.cluster == name))
            conn.execute(sa.delete(CREDENTIALS).where(CREDENTIALS.c.cluster == name))
            s.delete(row)

    @staticmethod
    def _cluster_row(s: Session, name: str) -> ClusterRow:
        row = s.get(ClusterRow, name)
        if row is None:
            raise NotFound(f"cluster {name} not found")
        return row

    # ---- join tokens and agent credentials (hashes only)

    def add_join_token(self, cluster: str, token_hash: str, expires_at: datetime) -> None:
        """Store the hash of a new one-time join token for ``cluster``."""
        expires = convert.utc(expires_at, "expires_at")
        with self._write(f"add join token for {cluster}") as s:
            self._cluster_row(s, cluster)
            if s.get(JoinTokenRow, token_hash) is not None:
                raise Conflict(f"join token for cluster {cluster} already exists")
            s.add(JoinTokenRow(token_hash=token_hash, cluster=cluster,
                               created_at=datetime.now(UTC), expires_at=expires))

    def consume_join_token(self, cluster: str, token_hash: str, now: datetime) -> None:
        """Mark a join token used, atomically; a failed call changes nothing."""
        at = convert.utc(now, "now")
        with self._write(f"consume join token for {cluster}") as s:
            used = s.connection().execute(
                sa.update(JOIN_TOKENS)
                .where(JOIN_TOKENS.c.token_hash == token_hash,
                       JOIN_TOKENS.c.cluster == cluster,
                       JOIN_TOKENS.c.used_at.is_(None),
                       JOIN_TOKENS.c.expires_at > at)
                .values(used_at=at)
            )
            if used.rowcount == 1:
                return
            row = s.get(JoinTokenRow, token_hash)
            if row is None or row.cluster != cluster:
                raise Unauthenticated(f"join token is not valid for cluster {cluster}")
            if row.used_at is not None:
                raise Conflict(
                    f"join token was already used at {convert.must(row.used_at).isoformat()}: "
                    f"issue a new join token for cluster {cluster}"
                )
            raise Unauthenticated(
                f"join token expired at {convert.must(row.expires_at).isoformat()}: "
                f"issue a new join token for cluster {cluster}"
            )

    def set_credential(self, cluster: str, credential_hash: str) -> None:
        """Store the hash of ``cluster``'s agent credential, replacing any previous one."""
        with self._write(f"set credential for {cluster}") as s:
            self._cluster_row(s, cluster)
            s.connection().execute(sa.delete(CREDENTIALS).where(CREDENTIALS.c.cluster == cluster))
            s.add(CredentialRow(cluster=cluster, credential_hash=credential_hash,
                                created_at=datetime.now(UTC)))

    def cluster_for_credential(self, credential_hash: str) -> str | None:
        """The cluster whose credential has this hash, or None."""
        with self._read("look up credential") as s:
            query = select(CredentialRow.cluster).where(
                CredentialRow.credential_hash == credential_hash)
            return s.exec(query).first()

    # ---- tasks

    def add_tasks(self, tasks: Sequence[TaskRecord], events: Sequence[EventRecord],
                  audit: AuditRecord | None = None) -> list[TaskRecord]:
        """Store new tasks and their events, all or nothing; returns them with ``seq`` set.
        ``audit``: the submit's audit record, committed with them (one write, and no crash
        can store the tasks without it).

        The hot path makes no lookups: the unique name and id columns and the events'
        foreign key refuse what is wrong, and only then are the names and ids looked up, to
        say which (Conflict naming every taken or repeated name, NotFound naming every
        event's unknown task).
        """
        names = [t.name for t in tasks]
        if len(set(names)) != len(names):
            with self._read("check task names") as s:
                _reject_duplicate_names(s, names)
        try:
            [stored] = self.write([NewTasks(tasks, events, audit)],
                                  what=f"add {len(tasks)} task(s)")
        except Conflict:
            new = {t.id for t in tasks}
            with self._read("check task names and ids") as s:
                _reject_duplicate_names(s, names)
                _require_tasks(s, [e.task_id for e in events if e.task_id not in new])
            raise
        return stored

    def get_task(self, name: str) -> TaskRecord:
        """The task named ``name``; NotFound if absent."""
        with self._read(f"get task {name}") as s:
            row = s.exec(select(TaskRow).where(TaskRow.name == name)).first()
            if row is None:
                raise NotFound(f"task {name} not found")
            return convert.task_record(row)

    def get_task_by_id(self, task_id: str) -> TaskRecord:
        """The task with id ``task_id``; NotFound if absent."""
        with self._read(f"get task {task_id}") as s:
            row = s.exec(select(TaskRow).where(TaskRow.id == task_id)).first()
            if row is None:
                raise NotFound(f"task with id {task_id} not found")
            return convert.task_record(row)

    def list_tasks(self, *, state: str | None = None, cluster: str | None = None,
                   states: Sequence[str] | None = None, queues: Sequence[str] | None = None,
                   after_seq: int = 0, limit: int | None = None,
                   parents: Sequence[str] | None = None) -> list[TaskRecord]:
        """Tasks in submission order, filtered by state, any of ``states``, cluster, any
        of ``queues`` and any of ``parents`` (the parts of those divided tasks); a page: the
        first ``limit`` with ``seq`` above ``after_seq``."""
        query = select(TaskRow)
        if parents is not None:
            query = query.where(col(TaskRow.parent).in_(list(parents)))
        if state is not None:
            query = query.where(TaskRow.state == state)
        if states is not None:
            query = query.where(col(TaskRow.state).in_(list(states)))
        if cluster is not None:
            query = query.where(TaskRow.cluster == cluster)
        if queues is not None:
            query = query.where(col(TaskRow.queue).in_(list(queues)))
        if after_seq:
            query = query.where(col(TaskRow.seq) > after_seq)
        query = query.order_by(col(TaskRow.seq))
        if limit is not None:
            query = query.limit(limit)
        with self._read("list tasks") as s:
            return [convert.task_record(r) for r in s.exec(query).all()]

    def delete_tasks(self, names: Sequence[str], ended: Sequence[str]) -> list[str]:
        """Delete the named tasks that are in one of the ``ended`` states, with their events
        and placements; returns the names deleted (a task not ended is left alone)."""
        deleted: list[str] = []
        with self._write(f"delete {len(names)} task(s)") as s:
            conn = s.connection()
            for chunk in _chunks(list(names)):
                rows = conn.execute(sa.select(TASKS.c.id, TASKS.c.name).where(
                    TASKS.c.name.in_(chunk), TASKS.c.state.in_(list(ended)))).all()
                ids = [r.id for r in rows]
                if not ids:
                    continue
                conn.execute(sa.delete(EVENTS).where(EVENTS.c.task_id.in_(ids)))
                conn.execute(sa.delete(PLACEMENTS).where(PLACEMENTS.c.task_id.in_(ids)))
                conn.execute(sa.delete(TASKS).where(TASKS.c.id.in_(ids)))
                deleted += [r.name for r in rows]
        return deleted

    def ended_before(self, ended: Sequence[str], cutoff: datetime, limit: int) -> list[str]:
        """Names of up to ``limit`` tasks in an ``ended`` state last updated before
        ``cutoff``, oldest first (for retention)."""
        query = (select(TaskRow.name).where(col(TaskRow.state).in_(list(ended)),
                                            col(TaskRow.updated_at) < convert.utc(cutoff, "cutoff"))
                 .order_by(col(TaskRow.seq)).limit(limit))
        with self._read("list ended tasks") as s:
            return list(s.exec(query).all())

    def apply(self, updates: Sequence[TaskUpdate] = (), events: Sequence[EventRecord] = (),
              placements: Sequence[PlacementRecord] = ()) -> None:
        """Write task updates, events and placements in ONE transaction (a batched commit).

        Updates of one task apply in order (a later value wins). NotFound, naming every
        unknown task id, if any update, event or placement refers to a task not stored:
        found without a lookup on the hot path (the updates' row count and the foreign
        keys tell), named by one afterwards.
        """
        try:
            self.write((), updates, events, placements,
                       what=f"apply {len(updates)} update(s), {len(events)} event(s)")
        except Conflict:
            ids = [*(u.task_id for u in updates if u.changes), *(e.task_id for e in events),
                   *(p.task_id for p in placements)]
            with self._read("check task ids") as s:
                _require_tasks(s, ids)
            raise

    def write(self, new: Sequence[NewTasks] = (), updates: Sequence[TaskUpdate] = (),
              events: Sequence[EventRecord] = (), placements: Sequence[PlacementRecord] = (),
              what: str = "") -> list[list[TaskRecord]]:
        """Several submits' new tasks (each with its events and audit record), then task
        updates, events and placements, in ONE transaction: all or nothing. Returns each
        submit's tasks with ``seq`` set, in ``new``'s order.

        What ``StoreWriter`` commits when writes queue up (a group commit). A constraint
        broken anywhere fails the whole write with a ``Conflict`` that does not say which
        part broke it (``add_tasks`` and ``apply`` look that up; the writer retries each
        part alone through them). NotFound, naming every unknown id, if an update refers
        to a task not stored (its row count tells, without a lookup).
        """
        task_values = [[convert.task_values(t) for t in n.tasks] for n in new]
        values = [v for vs in task_values for v in vs]
        new_events = [e for n in new for e in n.events]
        to_utc = convert.utc_memo()
        merged = _merge_updates(updates, to_utc)
        event_values = [convert.event_values(e, to_utc) for e in (*new_events, *events)]
        placement_values = [convert.placement_values(p, to_utc) for p in placements]
        audits = [n.audit for n in new if n.audit is not None]
        seq_of: dict[str, int] = {}
        if values or merged or event_values or placement_values or audits:
            with self._write_rows(what or f"write {len(values)} new task(s), {len(merged)} "
                                  f"update(s), {len(event_values)} event(s)") as conn:
                seq_of = self._bulk.insert_numbered(conn, "insert tasks", TASKS, values,
                                                    "id", "seq")
                by_keys: dict[tuple[str, ...], list[dict[str, Any]]] = {}
                group_of: dict[tuple[str, ...], list[dict[str, Any]]] = {}   # by key order
                for task_id, changes in merged.items():
                    keys = tuple(changes)
                    group = group_of.get(keys)
                    if group is None:
                        group = group_of[keys] = by_keys.setdefault(tuple(sorted(keys)), [])
                    group.append({"_task_id": task_id, **changes})
                updated = 0
                for params in by_keys.values():
                    updated += self._bulk.execute(conn, "update task", _UPDATE_TASK, params)
                if updated != len(merged):
                    _require_tasks(conn, merged)
                self._bulk.execute(conn, "insert events", _INSERT_EVENTS, event_values)
                self._bulk.execute(conn, "insert placements", _INSERT_PLACEMENTS,
                                   placement_values)
                self._bulk.execute(conn, "insert audit", _INSERT_AUDIT,
                                   [audit_values(a) for a in audits])
        if self.on_events is not None and event_values:
            self.on_events([*new_events, *events], {t.id: t.name for n in new for t in n.tasks})
        return [[replace(t, seq=seq_of[v["id"]], created_at=v["created_at"],
                         updated_at=v["updated_at"]) for t, v in zip(n.tasks, vs, strict=True)]
                for n, vs in zip(new, task_values, strict=True)]

    def task_events(self, task_id: str) -> list[EventRecord]:
        """A task's timeline, ordered by time, then by insertion."""
        with self._read(f"task events {task_id}") as s:
            query = (select(TaskEventRow).where(TaskEventRow.task_id == task_id)
                     .order_by(col(TaskEventRow.at), col(TaskEventRow.id)))
            return [convert.event_record(r) for r in s.exec(query).all()]

    def placements(self, task_id: str) -> list[PlacementRecord]:
        """Every placement of a task, oldest first."""
        with self._read(f"placements {task_id}") as s:
            query = (select(PlacementRow).where(PlacementRow.task_id == task_id)
                     .order_by(col(PlacementRow.at), col(PlacementRow.id)))
            return [convert.placement_record(r) for r in s.exec(query).all()]


def _merge_updates(updates: Iterable[TaskUpdate],
                   to_utc: Callable[[datetime, str], datetime] = convert.utc,
                   ) -> dict[str, dict[str, Any]]:
    """Updates per task id, merged in order; keys (once per set of keys: a commit's
    thousands of updates have a few) and timestamps (in UTC through ``to_utc``) checked."""
    merged: dict[str, dict[str, Any]] = {}
    checked: set[tuple[str, ...]] = set()
    for update in updates:
        changes = update.changes
        keys = tuple(changes)
        if keys not in checked:
            convert.check_keys(changes, TASK_UPDATE_FIELDS, "task")
            checked.add(keys)
        into = merged.get(update.task_id)
        if into is None:
            into = merged[update.task_id] = {}
        into.update(changes)
        at = changes.get("updated_at")
        if at is not None:
            into["updated_at"] = to_utc(at, "updated_at")
    return {task_id: changes for task_id, changes in merged.items() if changes}


def _reject_duplicate_names(s: Session, names: Sequence[str]) -> None:
    """Conflict naming every name taken by a stored task or repeated in the batch."""
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    unique = list(dict.fromkeys(names))
    existing: set[str] = set()
    for chunk in _chunks(unique):
        existing.update(s.exec(select(TaskRow.name).where(col(TaskRow.name).in_(chunk))).all())
    problems = []
    if existing:
        taken = [n for n in unique if n in existing]
        problems.append(f"task name(s) already exist: {', '.join(taken)}")
    if repeated:
        problems.append(f"task name(s) repeated in the batch: {', '.join(repeated)}")
    if problems:
        raise Conflict("; ".join(problems) + " (nothing was stored)")


def _require_tasks(conn: Session | Connection, task_ids: Iterable[str]) -> None:
    """NotFound naming every id in ``task_ids`` that is not stored."""
    wanted = list(dict.fromkeys(task_ids))
    found: set[str] = set()
    for chunk in _chunks(wanted):
        found.update(conn.execute(sa.select(TASKS.c.id).where(TASKS.c.id.in_(chunk))).scalars())
    missing = [t for t in wanted if t not in found]
    if missing:
        raise NotFound(f"task id(s) not found: {', '.join(missing)} (nothing was written)")

