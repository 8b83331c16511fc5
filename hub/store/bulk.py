"""Many-row writes through the driver's ``executemany``, without SQLAlchemy's per-row work.

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

On SQLite a statement's rows go in ONE call (``one_call``): the rows as one JSON array, the
statement rewritten to read them with ``json_each`` (``INSERT ... SELECT ... FROM
json_each(?)``, ``UPDATE ... FROM json_each(?)``), so SQLite writes them all in one step.
``executemany`` steps once a row, and the ``sqlite3`` module releases the interpreter's lock
(the GIL) around every step and must take it back after: beside an event loop running
Python, each take waits for the loop to drop the lock (up to the 5 ms switch interval), so
800 rows that take 3.5 ms alone took 2.8 s beside a thread spinning Python, and the hub's
commits ran at 4-5x their CPU in wall time in a 100-member burst (``docs/benchmarks.md``,
"The store's rows in one call"). One call takes the lock back a few times a statement, not
once a row. What is stored is the same: every plain value is a string, an integer, a
boolean or None, read back by ``->>`` as the value ``executemany`` would have bound; a JSON
column's value is nested in the row as it is and stored by ``->``, which renders it as the
engine's serializer (``jsontext.dumps``) writes it. A statement with a float or binary
column keeps ``executemany``, as does a call holding a NUL character (SQLite's ``->>``
ends text there) or a lone surrogate (the encoder refuses it). PostgreSQL keeps psycopg's
``executemany``.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Collection, Sequence
from operator import itemgetter
from typing import Any

from pydantic_core import PydanticSerializationError, to_json
from sqlalchemy import JSON, Float, LargeBinary, Numeric, Table, insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert, UpdateBase

from hub.store.tables import UTCDateTime

Process = Callable[[Any], Any]

# ``->>`` and ``json_each`` built in (3.38), ``UPDATE ... FROM`` (3.33).
ONE_CALL_SQLITE = (3, 38, 0)
_NOT_JSON_EXACT = (Float, Numeric, LargeBinary)   # kept on executemany: Float is a Numeric
_INSERT = re.compile(r"(INSERT INTO \S+ \([^()]*\)) VALUES \([?, ]*\)")
_UPDATE = re.compile(r"(UPDATE \S+ SET [^;]*?)( WHERE [^;]*)", re.DOTALL)
_NUL = "\\u0000"     # how a NUL character is written in JSON


def one_call_sql(sql: str, params: int, nested: Collection[int] = ()) -> str | None:
    """``sql`` (a compiled SQLite ``INSERT ... VALUES (?, ...)`` or ``UPDATE ... SET ...
    WHERE ...`` with ``params`` placeholders, in the order of the row's values) rewritten to
    take every row at once from one JSON array bound to its only ``?``; None for any other
    shape. The i-th placeholder becomes ``j.value ->> i`` (the SQL value), or for the
    indexes in ``nested`` (JSON columns, their value nested in the row as it is)
    ``j.value -> i`` (its JSON text); inserts keep the array's order (``ORDER BY j.key``: a
    task's ``seq``, an event's tie-break ``id``)."""
    if sql.count("?") != params or params == 0:
        return None
    values = [f"j.value {'->' if i in nested else '->>'} {i}" for i in range(params)]
    inserted = _INSERT.fullmatch(sql)
    if inserted is not None:
        return (f"{inserted.group(1)} SELECT {', '.join(values)} FROM json_each(?) AS j "
                "ORDER BY j.key")
    parts = sql.split("?")
    rewritten = "".join(part + value for part, value in zip(parts, values, strict=False))
    updated = _UPDATE.fullmatch(rewritten + parts[-1])
    if updated is None:
        return None
    return f"{updated.group(1)} FROM json_each(?) AS j{updated.group(2)}"


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
        exact = not any(isinstance(bind.type, _NOT_JSON_EXACT)
                        for bind in compiled.binds.values())
        # JSON columns go into the call's JSON as their values, not as their text: stored
        # as SQLite renders them, the text ``jsontext.dumps`` (the engine's serializer)
        # writes, without escaping each one into a string and SQLite reading it back.
        self.nested = {i for i, name in enumerate(self.names)
                       if isinstance(compiled.binds[name].type, JSON)}
        self.one_call = (one_call_sql(self.sql, len(self.names), self.nested)
                         if exact and self.positional and conn.dialect.name == "sqlite"
                         and sqlite3.sqlite_version_info >= ONE_CALL_SQLITE else None)

    def rows(self, params: Sequence[dict[str, Any]], nested: bool = False) -> list[Any]:
        """Each dict of ``params`` as the driver takes it (a tuple, or a dict by name);
        ``nested``: as ``one_call`` takes them, each JSON column's value left as it is."""
        steps: list[tuple[str, Process | None]] = []
        for i, name in enumerate(self.names):
            process = None if nested and i in self.nested else self.processors.get(name)
            if process is not None and name in self.timestamps:
                process = _once_per_value(process)
            steps.append((name, process))
        if not self.positional:
            return [{n: p[n] if f is None else f(p[n]) for n, f in steps} for p in params]
        # The values taken in one C call (``itemgetter``), then only the columns with a
        # bind processor rewritten: a row's Python is its processed columns, not all.
        take = itemgetter(*self.names)
        processed = [(i, f) for i, (_, f) in enumerate(steps) if f is not None]
        if len(self.names) == 1:
            return [(_one(f, p[n]),) for p in params for n, f in steps]
        if not processed:
            return [take(p) for p in params]
        out: list[Any] = []
        for p in params:
            row = list(take(p))
            for i, f in processed:
                row[i] = f(row[i])
            out.append(tuple(row))
        return out


def _one(process: Process | None, value: Any) -> Any:
    return value if process is None else process(value)


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


@functools.cache
def _inserts(table: Table, key: str, serial: str) -> tuple[Insert, Insert]:
    """``table``'s insert, and the same returning ``key`` and ``serial``: built once (a
    submit's commit runs one; building them anew was a few percent of a small one's CPU)."""
    stmt = insert(table)
    return stmt, stmt.returning(table.c[key], table.c[serial])


def _json_text(rows: list[Any]) -> str | None:
    """The rows as one JSON text (pydantic-core's encoder, as ``jsontext.dumps``), or None
    where one call cannot take them: a NUL character anywhere (SQLite's ``->>`` would end
    the text there) or a value the encoder refuses (a lone surrogate)."""
    try:
        text = to_json(rows).decode()
    except PydanticSerializationError:
        return None
    return None if _NUL in text else text


class BulkWriter:
    """Runs a statement for many rows in one call of the driver: ``executemany``, or on
    SQLite one statement reading the rows from a JSON array (``one_call_sql``)."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, tuple[str, ...]], _Compiled] = {}

    def _compile(self, conn: Connection, name: str, stmt: UpdateBase,
                 keys: tuple[str, ...]) -> _Compiled:
        compiled = self._compiled.get((name, keys))
        if compiled is None:
            compiled = self._compiled[(name, keys)] = _Compiled(conn, stmt, keys)
        return compiled

    def execute(self, conn: Connection, name: str, stmt: UpdateBase,
                params: Sequence[dict[str, Any]]) -> int:
        """Run ``stmt`` once per dict of ``params`` (all with the same keys); ``name`` and
        the keys identify the compiled statement, so one name must always mean one
        statement. An UPDATE's dicts must each name a different row (in one call SQLite
        applies one of two rows for the same target, not both in order). Returns the rows
        the driver counted as changed."""
        if not params:
            return 0
        compiled = self._compile(conn, name, stmt, tuple(params[0]))
        if compiled.one_call is not None and len(params) > 1:
            text = _json_text(compiled.rows(params, nested=True))
            if text is not None:
                return int(conn.exec_driver_sql(compiled.one_call, (text,)).rowcount)
        result = conn.exec_driver_sql(compiled.sql, compiled.rows(params))
        return int(result.rowcount)

    def insert_numbered(self, conn: Connection, name: str, table: Table,
                        params: Sequence[dict[str, Any]], key: str,
                        serial: str) -> dict[Any, int]:
        """Insert a row per dict of ``params`` into ``table`` (in their order) and return
        the ``serial`` column the database gave each, by the row's ``key`` (a unique
        column). On SQLite one call inserts and one more reads every number back as a
        single JSON value; elsewhere, or for a key with a NUL character, SQLAlchemy's
        ``RETURNING`` (asked in no particular order: in the parameters' order it inserted
        one row per statement on SQLite)."""
        if not params:
            return {}
        stmt, returning = _inserts(table, key, serial)
        compiled = self._compile(conn, name, stmt, tuple(params[0]))
        keys = None if compiled.one_call is None else _json_text([p[key] for p in params])
        if keys is None:
            returned = conn.execute(returning, params)
            return {found: int(number) for found, number in returned}
        self.execute(conn, name, stmt, params)
        text = conn.exec_driver_sql(
            f"SELECT json_group_array(json_array({key}, {serial})) FROM {table.name} "
            f"WHERE {key} IN (SELECT value FROM json_each(?))", (keys,)).scalar_one()
        return {found: int(number) for found, number in json.loads(text)}
