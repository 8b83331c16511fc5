"""Fixtures of the event tests: the in-process hub harness and a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hub.conftest import harness
from tests.support.redis import RedisServer, start_redis

__all__ = ["harness", "redis_server"]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on a free port, stopped afterwards."""
    server = start_redis()
    try:
        yield server
    finally:
        server.close()
