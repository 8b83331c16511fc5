"""``Store.apply`` writes its rows through the driver (``hub.store.bulk``): what it stores
must be exactly what SQLAlchemy's own executemany of the same statements stores."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate
from hub.store.bulk import BulkWriter, _Compiled, one_call_sql
from hub.store.tables import TABLES
from tests.store.make import at, task

TASKS, EVENTS, PLACEMENTS = TABLES["tasks"], TABLES["task_events"], TABLES["placements"]
EAST8 = timezone(timedelta(hours=8))
SCORES = [{"cluster": "east", "feasible": True, "score": 71.25, "reason": None,
           "plugin_scores": {"headroom": 40.5, "fit": 30.75}},
          {"cluster": "wést", "feasible": False, "score": None, "reason": "no ✓ node",
           "plugin_scores": {}}]


def _changes(i: int) -> dict[str, Any]:
    """Placement-like changes; timestamps shared by some rows, in another zone for others."""
    return {"state": "Placed", "cluster": "east", "node": None, "generation": i,
            "reasons": {"wést": "cordoned"} if i % 2 else {}, "scores": SCORES[: i % 3],
            "message": f"placed on east (score {i}.5) ✓",
            "updated_at": at(5).astimezone(EAST8) if i % 2 else at(i)}


def test_apply_stores_what_sqlalchemy_stores(store: Store) -> None:
    names = [f"b{i}" for i in range(6)] + [f"s{i}" for i in range(6)]
    store.add_tasks([task(n) for n in names], [])
    store.apply(
        [TaskUpdate(f"id-b{i}", _changes(i)) for i in range(6)],
        [EventRecord(f"id-b{i}", at(i).astimezone(EAST8), "Placed", f"on east ✓ {i}",
                     "east" if i % 2 else None, i) for i in range(6)],
        [PlacementRecord(f"id-b{i}", "east", i, at(7), [f"n{i}", "n✓"][: 1 + i % 2])
         for i in range(6)],
    )
    # The same writes through SQLAlchemy's own parameter processing, for the s tasks.
    engine = store._engine
    with engine.begin() as conn:
        by_keys: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for i in range(6):
            changes = _changes(i)
            by_keys.setdefault(tuple(sorted(changes)), []).append(
                {"_task_id": f"id-s{i}", **changes})
        for params in by_keys.values():
            conn.execute(sa.update(TASKS).where(TASKS.c.id == sa.bindparam("_task_id")),
                         params)
        conn.execute(sa.insert(EVENTS), [
            {"task_id": f"id-s{i}", "at": at(i).astimezone(EAST8), "kind": "Placed",
             "message": f"on east ✓ {i}", "cluster": "east" if i % 2 else None,
             "generation": i} for i in range(6)])
        conn.execute(sa.insert(PLACEMENTS), [
            {"task_id": f"id-s{i}", "cluster": "east", "generation": i, "at": at(7),
             "nodes": [f"n{i}", "n✓"][: 1 + i % 2]} for i in range(6)])
    for table, key, skip in ((TASKS, TASKS.c.id, ("seq", "id", "name", "spec")),
                             (EVENTS, EVENTS.c.task_id, ("id", "task_id")),
                             (PLACEMENTS, PLACEMENTS.c.task_id, ("id", "task_id"))):
        columns = [sa.cast(c, sa.Text) for c in table.c if c.name not in skip]
        with engine.connect() as conn:
            def stored(prefix: str, table: sa.Table = table, key: Any = key,
                       columns: list[Any] = columns, conn: Any = conn) -> list[tuple[Any, ...]]:
                query = sa.select(*columns).where(key.like(f"id-{prefix}%")).order_by(key)
                return [tuple(row) for row in conn.execute(query)]
            bulk, plain = stored("b"), stored("s")
        assert len(bulk) == 6
        assert bulk == plain, table.name


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["state", "cluster", "node", "generation", "reasons", "scores",
                                 "message", "updated_at"]), unique=True, max_size=8),
       st.integers(1, 4))
def test_each_row_is_every_value_through_its_columns_processor(
        keys: list[str], count: int) -> None:
    """Any set of columns (none, one, some with a bind processor, a timestamp shared by the
    rows): a row holds each value in the statement's order, processed where its column has
    a processor - what ``test_apply_stores_what_sqlalchemy_stores`` holds to SQLAlchemy."""
    engine = sa.create_engine("sqlite://")
    params = [{"_task_id": f"id-{i}", **{k: _changes(i)[k] for k in keys}} for i in range(count)]
    with engine.connect() as conn:
        compiled = _Compiled(conn, sa.update(TASKS).where(TASKS.c.id == sa.bindparam("_task_id")),
                             list(params[0]))
    expected = [tuple(p[n] if compiled.processors.get(n) is None else compiled.processors[n](p[n])
                      for n in compiled.names) for p in params]
    assert compiled.rows(params) == expected


# -- the rows in one call on SQLite ----------------------------------------------------------

def test_one_call_sql_reads_an_insert_or_an_update_from_one_json_array() -> None:
    assert one_call_sql("INSERT INTO t (a, b) VALUES (?, ?)", 2) == (
        "INSERT INTO t (a, b) SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?) AS j "
        "ORDER BY j.key")
    assert one_call_sql("UPDATE tasks SET state=?, node=? WHERE tasks.id = ?", 3) == (
        "UPDATE tasks SET state=j.value ->> 0, node=j.value ->> 1 FROM json_each(?) AS j "
        "WHERE tasks.id = j.value ->> 2")
    # Anything else keeps executemany: another shape, or placeholders the row does not fill.
    assert one_call_sql("DELETE FROM t WHERE id = ?", 1) is None
    assert one_call_sql("INSERT INTO t (a, b) VALUES (?, ?) RETURNING a", 2) is None
    assert one_call_sql("INSERT INTO t (a, b) VALUES (?, ?)", 3) is None
    assert one_call_sql("UPDATE t SET a=?", 1) is None


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One migrated SQLite store for the module's property tests, with tasks id-p0..id-p9."""
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('bulk') / 'fuyao.db'}")
    store.migrate()
    store.add_tasks([task(f"p{i}") for i in range(10)], [])
    try:
        yield store
    finally:
        store.close()


TEXT = st.text(st.characters(codec="utf-8"), max_size=40)   # NUL, controls, quotes, emoji
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
JSONISH = st.recursive(st.none() | st.booleans() | INT64 | TEXT
                       | st.floats(allow_nan=False, allow_infinity=False),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
ROWS = st.lists(st.tuples(st.integers(0, 9), TEXT, st.none() | TEXT, INT64,
                          st.datetimes(timezones=st.just(UTC)),
                          st.dictionaries(TEXT, TEXT, max_size=3), st.lists(JSONISH, max_size=3)),
                min_size=2, max_size=12)
_marks = itertools.count()


@settings(max_examples=80, deadline=None)
@given(ROWS)
def test_rows_in_one_call_store_exactly_what_executemany_stores(
        sqlite_store: Store, rows: list[tuple[Any, ...]]) -> None:
    """Any text (a NUL too: that call falls back to executemany), 64-bit integer, NULL,
    timestamp and JSON column value: the one-call insert and update store the values, the
    text, the types and the order that ``executemany`` of the statement SQLAlchemy compiled
    stores (a JSON column's text as the engine's serializer writes it)."""
    bulk = BulkWriter()
    mark = next(_marks)
    events = [{"task_id": f"id-p{t}", "at": when, "kind": f"{kind}-{mark}", "message": message,
               "cluster": cluster, "generation": generation}
              for t, message, cluster, generation, when, _, _ in rows
              for kind in ("one", "many")]
    one, many = events[0::2], events[1::2]
    last = {f"id-p{t}": (message, cluster, generation, reasons, scores)
            for t, message, cluster, generation, _, reasons, scores
            in rows}     # one update a task (``Store.write`` merges them so)
    updates = [{"_task_id": task_id, "message": m, "node": c, "generation": g, "reasons": r,
                "scores": sc} for task_id, (m, c, g, r, sc) in last.items()]
    with sqlite_store._engine.begin() as conn:
        compiled = bulk._compile(conn, "insert events", sa.insert(EVENTS), tuple(one[0]))
        assert compiled.one_call is not None
        assert bulk.execute(conn, "insert events", sa.insert(EVENTS), one) == len(one)
        conn.exec_driver_sql(compiled.sql, compiled.rows(many))
        columns = "message, typeof(message), cluster, typeof(cluster), generation, at, task_id"
        stored = {kind: [tuple(r) for r in conn.exec_driver_sql(
            f"SELECT {columns} FROM task_events WHERE kind = ? ORDER BY id",
            (f"{kind}-{mark}",))] for kind in ("one", "many")}
        assert stored["one"] == stored["many"]
        assert [r[0] for r in stored["one"]] == [e["message"] for e in one]    # in order
        # The update: through one call, then the same rows read back; then executemany of
        # the same values over other ones, read back again.
        update = sa.update(TASKS).where(TASKS.c.id == sa.bindparam("_task_id"))
        assert bulk.execute(conn, "update task", update, updates) == len(updates)
        ids = tuple(last)
        query = ("SELECT id, message, node, typeof(node), generation, reasons, scores "
                 f"FROM tasks WHERE id IN ({', '.join('?' * len(ids))}) ORDER BY id")
        after_one = [tuple(r) for r in conn.exec_driver_sql(query, ids)]
        assert [(r[1], r[2], r[4], json.loads(r[5]), json.loads(r[6])) for r in after_one] == [
            last[i] for i in sorted(ids)]
        conn.exec_driver_sql("UPDATE tasks SET message = '', node = NULL, generation = 0, "
                             "reasons = '{}', scores = '[]'")
        plain = bulk._compile(conn, "update task", update, tuple(updates[0]))
        conn.exec_driver_sql(plain.sql, plain.rows(updates))
        assert [tuple(r) for r in conn.exec_driver_sql(query, ids)] == after_one


def test_a_sqlite_commit_writes_each_table_in_one_statement(tmp_path: Path) -> None:
    """``Store.apply`` of 50 placements makes no ``executemany`` on SQLite (each would take
    the interpreter's lock back once a row, beside a busy event loop): the rows of each
    statement go in one call, and are all stored."""
    store = Store(f"sqlite:///{tmp_path / 'fuyao.db'}")
    store.migrate()
    names = [f"q{i}" for i in range(50)]
    store.add_tasks([task(n) for n in names], [])
    calls: list[tuple[str, bool]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
             executemany: bool) -> None:
        calls.append((statement, executemany))
    sa.event.listen(store._engine, "before_cursor_execute", seen)
    try:
        store.apply([TaskUpdate(f"id-{n}", _changes(i)) for i, n in enumerate(names)],
                    [EventRecord(f"id-{n}", at(1), "Placed", "on east", "east", 1)
                     for n in names],
                    [PlacementRecord(f"id-{n}", "east", 1, at(1), ["n1"]) for n in names])
    finally:
        sa.event.remove(store._engine, "before_cursor_execute", seen)
    assert calls and not [s for s, many in calls if many]
    assert sum("json_each" in s for s, _ in calls) >= 3    # the updates, events, placements
    assert len(store.task_events("id-q49")) == 1 and len(store.placements("id-q0")) == 1
    store.close()


def test_a_large_submit_gets_its_seqs_in_submit_order(store: Store) -> None:
    """Both backends: 300 tasks of one submit come back with increasing ``seq``s in the
    order given (``BulkWriter.insert_numbered``; placement order is by ``seq``)."""
    names = [f"n{(i * 7919) % 300:03d}" for i in range(300)]    # not in name order
    stored = store.add_tasks([task(n) for n in names], [])
    assert [t.name for t in stored] == names
    seqs = [t.seq for t in stored]
    assert seqs == sorted(seqs) and len(set(seqs)) == 300
    listed = store.list_tasks()
    assert [t.name for t in listed][-300:] == names
