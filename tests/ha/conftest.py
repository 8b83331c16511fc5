"""Fixtures of the HA tests: the in-process hub harness of ``tests/hub``, and a real
redis-server (``tests/events``)."""

from tests.events.conftest import redis_server
from tests.hub.conftest import harness

__all__ = ["harness", "redis_server"]
