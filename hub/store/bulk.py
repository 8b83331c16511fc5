"""Many-row writes straight through the driver, without SQLAlchemy's per-row work.

Called only by ``hub.store.store.Store``. A placement cycle's commit, a failover's re-queue
and a burst of agent reports each write thousands of rows with one statement. Given a Core
statement and a list of parameter dicts, SQLAlchemy builds every row's parameters anew and
runs every value through its type's bind processor: a py-spy of the hub during a
10,000-task failover found that per-row work the largest part of the store writer thread's
own Python (docs/reliability.md), time the event loop waits for the GIL.

``BulkWriter`` compiles each statement once per column set for the engine's dialect
(SQLite's ``?`` or psycopg's ``%(name)s`` with its casts), keeps the bind processor of each
parameter that has one (the same functions SQLAlchemy would call), and builds each row as
the driver takes it. A timestamp column's processor runs once per distinct value of a call
(a commit's rows share their ``now``). What reaches the database is what SQLAlchemy would
have sent; errors are SQLAlchemy's (``exec_driver_sql``), so ``wrap_errors`` maps them as
before.

On SQLite the rows go as a few many-row statements (``INSERT ... VALUES (...), (...)``,
``UPDATE ... FROM (VALUES ...)``), not one ``executemany``. The ``sqlite3`` module lets go
of the GIL around each row's step and must take it back for the next row; while the event
loop thread is busy deciding, it gets it back only when that thread is made to drop it
(every ``sys.getswitchinterval()``, 5 ms). 10,000 rows written with ``executemany`` beside
a busy thread took 20-24 s instead of 0.02 s; as 512-row statements, 0.17 s. In the hub
that convoy kept a failover's placement commits waiting until the decisions were done
(docs/reliability.md, "10,000 tasks in process, fifteenth session"). A statement takes
512 rows at most, fewer when a row has many columns (the connection's limit on a
statement's parameters): as few statements as that allows, since beside a busy thread each
statement's step (and the prepare of a text not in ``sqlite3``'s statement cache) costs one
wait for the GIL. An SQLite older than 3.33 (no ``UPDATE ... FROM``) and
other dialects keep ``executemany``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert, Update, UpdateBase

from hub.store.tables import UTCDateTime

Process = Callable[[Any], Any]

ROWS = 512                      # rows in one many-row statement, at most
_SQLITE_FROM = (3, 33, 0)       # the first SQLite with UPDATE ... FROM
_UPDATE = re.compile(r"UPDATE (\S+) SET (.+) WHERE (\S+) = \?")


def _many_row(sql: str, stmt: UpdateBase, columns: int) -> Callable[[int], str] | None:
    """For SQLite: the text of ``sql`` (one row, ``?`` parameters in row order) for n rows
    at once, or None where it has no such form here (it is then run per row)."""
    group = "(" + ", ".join(["?"] * columns) + ")"
    if isinstance(stmt, Insert):
        head, values, tail = sql.rpartition(" VALUES ")
        if not values or tail != group:
            return None
        return lambda n: f"{head} VALUES {', '.join([group] * n)}"
    match = _UPDATE.fullmatch(sql)
    if not isinstance(stmt, Update) or match is None:
        return None
    table, sets, key = match.groups()
    targets = sets.split(", ")
    if len(targets) != columns - 1 or not all(t.endswith("=?") for t in targets):
        return None
    assign = ", ".join(f"{t[:-2]}=v.column{i}" for i, t in enumerate(targets, 1))
    return lambda n: (f"UPDATE {table} SET {assign} FROM (VALUES {', '.join([group] * n)}) "
                      f"AS v WHERE {key} = v.column{columns}")


def _sizes(count: int, most: int) -> Iterator[int]:
    """``count`` rows split into statements of ``most`` rows (and one of the rest)."""
    full, rest = divmod(count, max(1, most))
    yield from [most] * full
    if rest:
        yield rest


class _Compiled:
    """One statement compiled for one dialect and column set."""

    def __init__(self, conn: Connection, stmt: UpdateBase, keys: Sequence[str]) -> None:
        compiled = stmt.compile(dialect=conn.dialect, column_keys=list(keys),
                                for_executemany=True)
        self.sql = str(compiled)
        self.positional = conn.dialect.positional
        order = compiled.positiontup if self.positional else None
        self.names: list[str] = list(order) if order is not None else list(keys)
        processors: dict[str, Process] = dict(compiled._bind_processors)  # type: ignore[arg-type]
        self.processors = processors
        self.timestamps = {name for name, bind in compiled.binds.items()
                           if isinstance(bind.type, UTCDateTime)}
        self.many_row: Callable[[int], str] | None = None
        self.params = 0     # the most parameters one statement may take (many-row only)
        if (conn.dialect.name == "sqlite" and self.positional
                and sqlite3.sqlite_version_info >= _SQLITE_FROM):
            raw = conn.connection.dbapi_connection
            if isinstance(raw, sqlite3.Connection):
                self.params = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
                self.many_row = _many_row(self.sql, stmt, len(self.names))
        self._full = ""     # the text for a full statement, made once

    def run(self, conn: Connection, params: Sequence[dict[str, Any]],
            serials: list[int] | None = None) -> int:
        """Write every row of ``params``; the rows the driver counted as changed.
        ``serials`` (many-row INSERTs only): each row's rowid is appended to it, in order."""
        rows = self.rows(params)
        if self.many_row is None:
            return int(conn.exec_driver_sql(self.sql, rows).rowcount)
        changed, start = 0, 0
        most = max(1, min(ROWS, self.params // len(self.names)))
        for size in _sizes(len(rows), most):
            text = self._full if size == most and self._full else self.many_row(size)
            if size == most:
                self._full = text
            flat = tuple(v for row in rows[start:start + size] for v in row)
            result = conn.exec_driver_sql(text, flat)
            changed += int(result.rowcount)
            if serials is not None:
                # One statement's rows take consecutive rowids in VALUES order (an
                # AUTOINCREMENT key: each one more than the largest ever); the last is
                # the connection's last_insert_rowid.
                last = result.lastrowid
                assert result.rowcount == size and last is not None, (result.rowcount, size)
                serials.extend(range(last - size + 1, last + 1))
            start += size
        return changed

    def rows(self, params: Sequence[dict[str, Any]]) -> list[Any]:
        """Each dict of ``params`` as the driver takes it (a tuple, or a dict by name)."""
        steps: list[tuple[str, Process | None]] = []
        for name in self.names:
            process = self.processors.get(name)
            if process is not None and name in self.timestamps:
                process = _once_per_value(process)
            steps.append((name, process))
        if self.positional:
            return [tuple(p[n] if f is None else f(p[n]) for n, f in steps) for p in params]
        return [{n: p[n] if f is None else f(p[n]) for n, f in steps} for p in params]


def _once_per_value(process: Process) -> Process:
    """``process`` remembering its answers (for hashable values seen again and again)."""
    seen: dict[Any, Any] = {}

    def run(value: Any) -> Any:
        try:
            return seen[value]
        except KeyError:
            out = seen[value] = process(value)
            return out

    return run


class BulkWriter:
    """Runs a statement for many rows: a few many-row statements on SQLite, one
    ``executemany`` of the driver elsewhere."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, tuple[str, ...]], _Compiled] = {}

    def execute(self, conn: Connection, name: str, stmt: UpdateBase,
                params: Sequence[dict[str, Any]]) -> int:
        """Run ``stmt`` once per dict of ``params`` (all with the same keys); ``name`` and
        the keys identify the compiled statement, so one name must always mean one
        statement. Returns the rows the driver counted as changed."""
        if not params:
            return 0
        keys = tuple(params[0])
        compiled = self._compiled.get((name, keys))
        if compiled is None:
            compiled = self._compiled[(name, keys)] = _Compiled(conn, stmt, keys)
        return compiled.run(conn, params)

    def insert_serial(self, conn: Connection, name: str, stmt: Insert,
                      params: Sequence[dict[str, Any]]) -> list[int] | None:
        """Insert every row of ``params`` into a table whose key is an SQLite
        ``INTEGER PRIMARY KEY AUTOINCREMENT`` and return each row's key, in order, without
        ``RETURNING`` (whose rows ``sqlite3`` steps one at a time, each taking the GIL back);
        None, with nothing written, where this dialect has no many-row form (the caller
        asks ``RETURNING``)."""
        if not params:
            return []
        keys = tuple(params[0])
        compiled = self._compiled.get((name, keys))
        if compiled is None:
            compiled = self._compiled[(name, keys)] = _Compiled(conn, stmt, keys)
        if compiled.many_row is None:
            return None
        serials: list[int] = []
        compiled.run(conn, params, serials)
        return serials
