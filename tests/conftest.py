"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import start_postgres


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database for tests: ``FUYAO_TEST_PG_URL`` or a throwaway server."""
    server = start_postgres()
    try:
        yield server.url
    finally:
        server.stop()
