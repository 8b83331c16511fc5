"""An in-process hub for tests: the real Hub on a temp SQLite store, REST through an ASGI
transport, and the real gRPC agent channel listening on a loopback port."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from hub.api import create_app
from hub.config import HubConfig, Timings
from hub.core import Hub
from hub.server import AgentListeners, start_agent_listeners

FAST = Timings(unknown_after=1.0, not_ready_after=2.0, eviction_timeout=0.5,
               unschedulable_timeout=1.0, placement_interval=0.1, monitor_interval=0.1,
               member_lease=1.0, failover_margin=0.5)


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def auth_headers(token: str) -> dict[str, str]:
    """What the SDK sends: the bearer token, and the JSON content type every mutation needs."""
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


@dataclass
class HubHarness:
    """A started hub with a REST client and the agent channel's address."""

    hub: Hub
    api: httpx.AsyncClient
    agent_address: str
    listeners: AgentListeners
    register_address: str = ""        # with TLS: where agents enroll for a certificate
    home: Path | None = None

    @property
    def grpc_server(self) -> grpc.aio.Server:
        """The agent port's gRPC server."""
        return self.listeners.servers[0]


async def start_harness(home: Path, timings: Timings = FAST, db_url: str | None = None,
                        tls: bool = False, redis_url: str | None = None,
                        **config: Any) -> HubHarness:
    """Start a hub (SQLite in ``home`` unless ``db_url``), its REST app and agent channel
    (plaintext unless ``tls``: the TLS path has its own tests); ``config``: more
    ``HubConfig`` fields."""
    port, register = free_port(), free_port()
    hub = Hub(HubConfig(home=home, db_url=db_url, agent_port=port, timings=timings,
                        agent_tls=tls, redis_url=redis_url, register_port=register, **config))
    home.mkdir(parents=True, exist_ok=True)
    await hub.start()
    listeners = await start_agent_listeners(hub, hub.config)
    token = (home / "admin.token").read_text().strip()
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(hub)),
                            base_url="http://hub", headers=auth_headers(token))
    return HubHarness(hub, api, f"127.0.0.1:{port}", listeners,
                      f"127.0.0.1:{register}" if tls else "", home)


async def stop_harness(h: HubHarness) -> None:
    """Stop everything start_harness started."""
    await h.api.aclose()
    await h.listeners.stop(grace=0.5)
    await h.hub.stop()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[HubHarness]:
    """A running in-process hub."""
    h = await start_harness(tmp_path / "hub")
    try:
        yield h
    finally:
        await stop_harness(h)
