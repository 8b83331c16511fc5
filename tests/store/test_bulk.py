"""``Store.apply`` writes its rows through the driver (``hub.store.bulk``): what it stores
must be exactly what SQLAlchemy's own executemany of the same statements stores."""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Any

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate
from hub.store.bulk import _Compiled
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
