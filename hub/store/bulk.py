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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import UpdateBase

from hub.store.tables import UTCDateTime

Process = Callable[[Any], Any]


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

    def rows(self, params: Sequence[dict[str, Any]]) -> list[Any]:
        """Each dict of ``params`` as the driver takes it (a tuple, or a dict by name)."""
        steps: list[tuple[str, Process | None]] = []
        for name in self.names:
            process = self.processors.get(name)
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


class BulkWriter:
    """Runs a statement for many rows with one ``executemany`` of the driver."""

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
        result = conn.exec_driver_sql(compiled.sql, compiled.rows(params))
        return int(result.rowcount)
