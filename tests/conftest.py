"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.postgres import start_postgres

# Properties assert what holds, never how fast: on a shared, loaded machine one example can
# take longer than hypothesis' default 200 ms deadline (a node-record property failed so at
# load 17), which says nothing about the rule under test.
settings.register_profile("fuyao", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fuyao")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database for tests: ``FUYAO_TEST_PG_URL`` or a throwaway server."""
    server = start_postgres()
    try:
        yield server.url
    finally:
        server.stop()
