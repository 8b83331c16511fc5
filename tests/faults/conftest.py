"""Fixtures of the fault tests: a real redis-server that a test may stop and start."""

from tests.events.conftest import redis_server

__all__ = ["redis_server"]
