"""Fixtures of the HA tests: the in-process hub harness of ``tests/hub``."""

from tests.hub.conftest import harness

__all__ = ["harness"]
