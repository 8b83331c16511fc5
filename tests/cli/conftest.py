"""Fixtures for fuyaoctl tests: a fake hub, and a runner that points the CLI at it."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from fuyaoctl.cli import AppContext, cli
from tests.cli.fakehub import FakeHub

Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def _no_hub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own FUYAO_HUB / FUYAO_TOKEN must not leak into tests."""
    monkeypatch.delenv("FUYAO_HUB", raising=False)
    monkeypatch.delenv("FUYAO_TOKEN", raising=False)


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub()


@pytest.fixture
def run(hub: FakeHub) -> Iterator[Run]:
    """``run("task", "list", input=...)``: invoke fuyaoctl against the fake hub."""
    http = hub.http()

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, obj=AppContext(http=http))

    yield invoke
    http.close()


def as_json(result: Result) -> Any:
    """stdout of a successful ``-o json`` run, parsed."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
