"""Opening, migrating and reopening the store; URLs; concurrency with the writer."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, make_url

from fuyao.errors import FuyaoError, InvalidInput, Transient
from hub.store import LATEST_VERSION, MIGRATIONS, Migration, Store, TaskUpdate
from hub.store.tables import TABLES
from tests.store.make import at, cluster, submitted, task
from tests.support.postgres import free_port


def test_migrate_is_idempotent(empty_url: str) -> None:
    store = Store(empty_url)
    assert store.schema_version() == 0
    assert store.migrate() == LATEST_VERSION
    store.create_cluster(cluster("east"))
    assert store.migrate() == LATEST_VERSION
    assert Store(empty_url).migrate() == LATEST_VERSION
    assert store.schema_version() == LATEST_VERSION
    assert [c.name for c in store.list_clusters()] == ["east"]
    store.close()


def _add_sla_column(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE tasks ADD COLUMN sla_seconds INTEGER"))
    conn.execute(sa.text("UPDATE tasks SET sla_seconds = 3600"))


def test_a_database_at_an_older_version_is_upgraded(empty_url: str) -> None:
    old = Store(empty_url)
    assert old.migrate(MIGRATIONS[:1]) == 1
    old.add_tasks([task("a")], [])
    old.close()
    upgraded = [*MIGRATIONS, Migration(LATEST_VERSION + 1, "task sla", _add_sla_column)]
    new = Store(empty_url)
    assert new.migrate(upgraded) == LATEST_VERSION + 1
    assert new.migrate(upgraded) == LATEST_VERSION + 1      # applied once only
    assert new.get_task("a").name == "a"
    engine = sa.create_engine(new.url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT sla_seconds FROM tasks")).scalar_one() == 3600
        versions = conn.execute(sa.text("SELECT version FROM schema_version")).scalars().all()
    engine.dispose()
    assert sorted(versions) == list(range(1, LATEST_VERSION + 2))
    new.close()
    with pytest.raises(FuyaoError, match="newer than this hub"):
        Store(empty_url).migrate()


def test_two_hubs_migrating_at_once_apply_each_migration_once(empty_url: str) -> None:
    results: list[int | Exception] = []

    def start() -> None:
        store = Store(empty_url)
        try:
            results.append(store.migrate())
        except Exception as exc:
            results.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [LATEST_VERSION] * 3
    assert Store(empty_url).schema_version() == LATEST_VERSION


def test_a_store_that_was_never_migrated_says_so(empty_url: str) -> None:
    with pytest.raises(FuyaoError, match=r"version 0 .* run migrate"):
        Store(empty_url).list_tasks()


def test_the_migrated_schema_matches_the_models(store: Store) -> None:
    engine = sa.create_engine(store.url)
    inspector = sa.inspect(engine)
    for table in TABLES.values():
        got = {c["name"]: c for c in inspector.get_columns(table.name)}
        assert sorted(got) == sorted(table.columns.keys()), table.name
        for column in table.columns:
            assert got[column.name]["nullable"] == column.nullable, f"{table}.{column.name}"
            assert _kind(got[column.name]["type"]) == _kind(column.type), f"{table}.{column}"
        assert (set(inspector.get_pk_constraint(table.name)["constrained_columns"])
                == {c.name for c in table.primary_key.columns}), table.name
        indexes = {tuple(i["column_names"]) for i in inspector.get_indexes(table.name)}
        assert {tuple(c.name for c in i.columns) for i in table.indexes} <= indexes, table.name
        uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints(table.name)}
        wanted = {(c.name,) for c in table.columns if c.unique}
        assert wanted <= uniques | indexes, table.name
        fks = {(tuple(f["constrained_columns"]), f["referred_table"])
               for f in inspector.get_foreign_keys(table.name)}
        assert fks == {((f.parent.name,), f.column.table.name) for f in table.foreign_keys}
    assert set(inspector.get_table_names()) == {*TABLES, "schema_version"}
    engine.dispose()


def _kind(kind: sa.types.TypeEngine[object]) -> str:
    kind = getattr(kind, "impl", kind)
    for name, cls in (("json", sa.JSON), ("datetime", sa.DateTime), ("bool", sa.Boolean),
                      ("int", sa.Integer), ("float", sa.Float), ("text", sa.Text),
                      ("string", sa.String)):
        if isinstance(kind, cls):
            return name
    return type(kind).__name__


def test_a_restarted_hub_sees_every_task_and_cluster(store_url: str) -> None:
    first = Store(store_url)
    first.create_cluster(cluster("east"))
    first.add_join_token("east", "tok-hash", at(3600))
    added = first.add_tasks([task("a"), task("b")], [submitted(task("a"))])
    first.apply([TaskUpdate("id-a", {"state": "Running", "cluster": "east", "node": "n1"})])
    first.close()

    second = Store(store_url)
    second.migrate()
    assert second.get_cluster("east") == cluster("east")
    assert [(t.name, t.state, t.node) for t in second.list_tasks()] == [
        ("a", "Running", "n1"), ("b", "Queued", None)]
    assert [e.kind for e in second.task_events("id-a")] == ["Submitted"]
    second.consume_join_token("east", "tok-hash", at(1))
    [later] = second.add_tasks([task("c")], [])
    assert later.seq > max(t.seq for t in added)
    second.close()


@contextmanager
def _writer_holding_lock(url: str) -> Iterator[None]:
    """Another connection in the middle of a write transaction that changed task ``a``."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn = sqlite3.connect(parsed.database or "", isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("UPDATE tasks SET state = 'Running'")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    target = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(target) as pg:
        pg.execute("UPDATE tasks SET state = 'Running'")
        yield
        pg.rollback()


def test_reads_do_not_wait_for_a_writer(store_url: str) -> None:
    store = Store(store_url, busy_timeout_s=0.2)   # a blocked SQLite read would fail fast
    store.add_tasks([task("a")], [])
    with _writer_holding_lock(store_url):
        assert store.get_task("a").state == "Queued"
        assert [t.name for t in store.list_tasks(state="Queued")] == ["a"]
    store.close()


def test_a_write_blocked_past_the_busy_timeout_is_transient(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fuyao.db'}"
    store = Store(url, busy_timeout_s=0.2)
    store.migrate()
    store.add_tasks([task("a")], [])
    with _writer_holding_lock(url), pytest.raises(Transient, match="locked"):
        store.apply([TaskUpdate("id-a", {"state": "Placed"})])
    store.apply([TaskUpdate("id-a", {"state": "Placed"})])     # fine once the lock is gone
    assert store.get_task("a").state == "Placed"


def test_sqlite_file_is_created_with_its_directory_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "fuyao.db"
    Store(f"sqlite:///{path}").migrate()
    assert path.exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_sqlite_connections_enforce_foreign_keys_and_wait_when_busy(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fuyao.db'}", busy_timeout_s=2.5)
    store.migrate()
    with store._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 2500
        with pytest.raises(sa.exc.IntegrityError, match="FOREIGN KEY"):
            conn.execute(sa.text("INSERT INTO placements (task_id, cluster, generation, at, "
                                 "nodes) VALUES ('ghost', 'east', 1, '2025-01-01', '[]')"))


@pytest.mark.parametrize(
    ("url", "wanted"),
    [
        pytest.param("not a url", "not a database URL", id="garbage"),
        pytest.param("mysql://u@h/db", "unsupported database 'mysql'", id="mysql"),
        pytest.param("postgresql+psycopg2://u@h/db", "unsupported database", id="psycopg2"),
        pytest.param("sqlite://", "needs a file path", id="sqlite-memory"),
        pytest.param("sqlite:///:memory:", "needs a file path", id="sqlite-memory-explicit"),
    ],
)
def test_bad_urls_are_invalid_input(url: str, wanted: str) -> None:
    with pytest.raises(InvalidInput, match=wanted):
        Store(url)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_postgres_urls_use_psycopg(scheme: str) -> None:
    store = Store(f"{scheme}://fuyao:secret@db.example:5432/fuyao")
    assert store.url.drivername == "postgresql+psycopg" and store.backend == "postgresql"
    assert "secret" not in repr(store)


def test_an_unreachable_postgres_is_transient() -> None:
    store = Store(f"postgresql://postgres@127.0.0.1:{free_port()}/fuyao")
    with pytest.raises(Transient, match="store unavailable"):
        store.migrate()
