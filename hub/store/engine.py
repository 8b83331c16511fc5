"""Database engines for the store: URL checking, SQLite tuning, sessions and error wrapping.

Called only by ``hub.store.store.Store``. SQLite runs in WAL mode with a busy timeout and
foreign keys on; read transactions start with a plain ``BEGIN`` (they read a snapshot and
never wait for the writer), write transactions with ``BEGIN IMMEDIATE`` (they take the write
lock up front, so a read-then-write never fails half way). PostgreSQL uses psycopg 3 with
READ COMMITTED. SQLAlchemy errors are turned into ``fuyao.errors`` here, at the boundary.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from fuyao.errors import Conflict, FuyaoError, InvalidInput, Transient
from hub.store import jsontext

WRITE_OPTION = "fuyao_write"   # connection execution option: begin a write transaction
DEFAULT_BUSY_TIMEOUT_S = 5.0
_PG_DRIVERS = ("postgresql", "postgres", "postgresql+psycopg")
_SQLITE_DRIVERS = ("sqlite", "sqlite+pysqlite")


def parse_url(url: str) -> URL:
    """Check a store URL and pin its driver: SQLite file (pysqlite) or PostgreSQL (psycopg)."""
    try:
        parsed = sa.make_url(url)
    except (ArgumentError, ValueError):     # ValueError: a port that is not a number
        shown_url = url.split("@", 1)[-1] if "@" in url else url
        raise InvalidInput(
            f"store URL ...{shown_url!r} is not a database URL (is the port a number?): use "
            "sqlite:///ABS/PATH.db or postgresql://USER@HOST:PORT/DB"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise InvalidInput(f"store URL {shown!r}: port {parsed.port} is not a TCP port "
                           "(1-65535)")
    if parsed.drivername in _SQLITE_DRIVERS:
        path = parsed.database or ""
        if path in ("", ":memory:") or path.startswith("file:"):
            raise InvalidInput(
                f"store URL {shown!r}: SQLite needs a file path (sqlite:///ABS/PATH.db); "
                "an in-memory database would lose every task on restart"
            )
        return parsed.set(drivername="sqlite+pysqlite",
                          database=str(Path(path).expanduser().resolve()))
    if parsed.drivername in _PG_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    raise InvalidInput(
        f"store URL {shown!r}: unsupported database {parsed.drivername!r}; "
        "use sqlite:///ABS/PATH.db or postgresql://USER@HOST:PORT/DB"
    )


def create_engine(url: URL, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> Engine:
    """An engine for a URL from ``parse_url``; creates a SQLite file's parent directory."""
    if url.get_backend_name() == "postgresql":
        return sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10},
                                json_serializer=jsontext.dumps)
    Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        url, connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
        json_serializer=jsontext.dumps,
    )
    _tune_sqlite(engine, busy_timeout_s)
    return engine


def _enable_wal(cursor: Any, busy_timeout_s: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried: SQLite answers "database is locked" at once,
    without waiting on the busy timeout, when two connections convert a new file together."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _tune_sqlite(engine: Engine, busy_timeout_s: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None        # we emit BEGIN ourselves (below)
        cursor = dbapi_conn.cursor()
        try:
            # busy_timeout first: switching a new file to WAL takes a lock that another
            # hub starting at the same moment may hold.
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            _enable_wal(cursor, busy_timeout_s)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=FULL")   # a commit survives power loss too
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def wrap_errors(what: str) -> Iterator[None]:
    """Turn SQLAlchemy errors raised inside into ``fuyao.errors``, chaining the original."""
    try:
        yield
    except FuyaoError:
        raise
    except IntegrityError as exc:
        raise Conflict(f"{what}: {_reason(exc)}") from exc
    except (OperationalError, InterfaceError, DisconnectionError, PoolTimeout) as exc:
        raise Transient(f"store unavailable ({what}): {_reason(exc)}") from exc
    except SQLAlchemyError as exc:
        raise FuyaoError(f"store error ({what}): {_reason(exc)}") from exc


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
