"""Fixtures: a real PostgreSQL server (``pg_url``) and stores on both backends.

The server logic lives in ``tests/support/postgres.py``; if PostgreSQL cannot start, every
postgres-parametrized test errors with the reason (never a silent skip). PostgreSQL's
``CREATE DATABASE`` takes a quarter second, so ``store_url`` reuses one migrated database per
session and empties its tables before each test; ``empty_url`` makes a brand-new database
for the tests of migrations themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from hub.store import Store
from tests.support.postgres import create_database, drop_database, fresh_database

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_store_url(pg_url: str) -> Iterator[str]:
    """A PostgreSQL database of the store tests' own, migrated once per session."""
    url = create_database(pg_url)
    store = Store(url)
    store.migrate()
    store.close()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it: a new SQLite path, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'home' / 'fuyao.db'}"
        return
    with fresh_database(request.getfixturevalue("pg_url")) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database whose tables are all empty."""
    if request.param == "sqlite":
        sqlite_url = f"sqlite:///{tmp_path / 'home' / 'fuyao.db'}"
        Store(sqlite_url).migrate()
        return sqlite_url
    pg: str = request.getfixturevalue("pg_store_url")
    _truncate_all(pg)
    return pg


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A store on ``store_url``, closed after the test."""
    opened = Store(store_url)
    opened.migrate()
    try:
        yield opened
    finally:
        opened.close()


def _truncate_all(url: str) -> None:
    target = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(target, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                            "AND tablename <> 'schema_version'").fetchall()
        tables = ", ".join(f'"{name}"' for (name,) in rows)
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
