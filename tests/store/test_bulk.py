"""``Store.apply`` writes its rows through the driver (``hub.store.bulk``): what it stores
must be exactly what SQLAlchemy's own executemany of the same statements stores."""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from hub.store import EventRecord, PlacementRecord, Store, TaskUpdate
from hub.store.bulk import _sizes
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


@pytest.mark.parametrize("n", [6, 521])   # 521: SQLite's many-row statements of 512 and 9
def test_apply_stores_what_sqlalchemy_stores(store: Store, n: int) -> None:
    names = [f"b{i}" for i in range(n)] + [f"s{i}" for i in range(n)]
    store.add_tasks([task(name) for name in names], [])
    store.apply(
        [TaskUpdate(f"id-b{i}", _changes(i)) for i in range(n)],
        [EventRecord(f"id-b{i}", at(i).astimezone(EAST8), "Placed", f"on east ✓ {i}",
                     "east" if i % 2 else None, i) for i in range(n)],
        [PlacementRecord(f"id-b{i}", "east", i, at(7), [f"n{i}", "n✓"][: 1 + i % 2])
         for i in range(n)],
    )
    # The same writes through SQLAlchemy's own parameter processing, for the s tasks.
    engine = store._engine
    with engine.begin() as conn:
        by_keys: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for i in range(n):
            changes = _changes(i)
            by_keys.setdefault(tuple(sorted(changes)), []).append(
                {"_task_id": f"id-s{i}", **changes})
        for params in by_keys.values():
            conn.execute(sa.update(TASKS).where(TASKS.c.id == sa.bindparam("_task_id")),
                         params)
        conn.execute(sa.insert(EVENTS), [
            {"task_id": f"id-s{i}", "at": at(i).astimezone(EAST8), "kind": "Placed",
             "message": f"on east ✓ {i}", "cluster": "east" if i % 2 else None,
             "generation": i} for i in range(n)])
        conn.execute(sa.insert(PLACEMENTS), [
            {"task_id": f"id-s{i}", "cluster": "east", "generation": i, "at": at(7),
             "nodes": [f"n{i}", "n✓"][: 1 + i % 2]} for i in range(n)])
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
        assert len(bulk) == n
        assert bulk == plain, table.name


@given(st.integers(0, 5000), st.integers(1, 1000))
def test_many_row_statements_cover_every_row_once(count: int, most: int) -> None:
    """SQLite's rows go in as few statements as the limit (``most`` rows) allows: full ones
    and at most one of the rest, together exactly ``count``."""
    sizes = list(_sizes(count, most))
    assert sum(sizes) == count
    assert all(0 < size <= most for size in sizes)
    assert len(sizes) == -(-count // most)


@pytest.mark.parametrize("n", [1, 521])
def test_add_tasks_gives_each_task_the_seq_its_row_holds(store: Store, n: int) -> None:
    """SQLite inserts tasks in many-row statements and derives their seqs without
    RETURNING: each returned seq is its own row's, in submission order, after what was
    stored before (and a task deleted before does not give its seq again)."""
    first = store.add_tasks([task("before"), task("gone", state="Succeeded")], [])
    assert store.delete_tasks(["gone"], ["Succeeded"]) == ["gone"]
    added = store.add_tasks([task(f"t{i:04d}") for i in range(n)], [])
    held = {rec.id: rec.seq for rec in store.list_tasks()}
    assert [rec.seq for rec in added] == [held[rec.id] for rec in added]
    seqs = [rec.seq for rec in added]
    assert seqs == sorted(seqs) and len(set(seqs)) == n
    assert seqs[0] > max(rec.seq for rec in first)
