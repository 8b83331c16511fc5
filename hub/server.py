"""Run a hub process: REST (8848), agent gRPC (8849) and health/metrics (8851) in one loop.

``serve(config)`` is what ``fuyao-hub serve`` runs. It starts the ``Hub`` (store, state
rebuild, loops), then the three listeners, and on SIGTERM/SIGINT stops them in reverse:
listeners first (agents reconnect elsewhere or later), then the loops, then the store, so
no acknowledged write is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Generator

import grpc
import uvicorn
from fastapi import FastAPI

from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from hub import heap
from hub.agent_service import AgentChannel
from hub.api import create_app, create_health_app
from hub.config import HubConfig
from hub.core import Hub
from hub.ha import Deposed
from hub.push.supervisor import PushAgents
from hub.push.vault import Vault, load_key
from hub.startup import CannotStart, Prepared, prepare

log = logging.getLogger(__name__)

# A full inventory of a large member (thousands of nodes) is several MB; 4 MB is gRPC's default.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling (the hub handles signals for all listeners)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _uvicorn(app: FastAPI) -> _Server:
    # Served on a socket ``hub.startup`` already bound (no SO_REUSEPORT, bound before any
    # write), so uvicorn's own host/port are not used.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return _Server(config)


def agent_server(hub: Hub, address: str) -> grpc.aio.Server:
    """The agent channel's gRPC server on ``address``, with TLS when the hub has its CA."""
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        # gRPC turns SO_REUSEPORT on by default: a second hub could then share the port
        # and take half of the agents' connections.
        ("grpc.so_reuseport", 0),
    ])
    pb_grpc.add_AgentChannelServicer_to_server(  # type: ignore[no-untyped-call]
        AgentChannel(hub), server)
    if hub.pki is not None:
        credentials = grpc.ssl_server_credentials([(hub.pki.server_key, hub.pki.server_cert)])
        bound = server.add_secure_port(address, credentials)
    else:
        log.warning("agent channel without TLS (--agent-insecure): use only behind a "
                    "TLS-terminating proxy or on a trusted network")
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise CannotStart(f"cannot listen on {address} (--agent-port): in use or not local")
    return server


async def serve(config: HubConfig, stop: asyncio.Event | None = None) -> None:
    """Run the hub until ``stop`` is set or the process gets SIGTERM/SIGINT."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    if config.secrets_key_file is not None:
        load_key(config.secrets_key_file)                  # a bad key file: refuse to start
    prepared = await asyncio.to_thread(prepare, config)   # raises before writing anything
    try:
        await _run(config, prepared, stop)
    finally:
        prepared.close()


async def _run(config: HubConfig, prepared: Prepared, stop: asyncio.Event) -> None:
    hub = Hub(config)
    hub.ha.on_lost = lambda _reason: stop.set()
    try:
        await hub.start()
        prepared.release_agent_port()
        grpc_server = agent_server(hub, f"{config.host}:{config.agent_port}")
        await grpc_server.start()
        heap.settle()
    except BaseException:
        await hub.stop()
        raise
    push = push_agents(config)
    app = create_app(hub)
    app.state.push = push
    if push is not None:
        await push.start()
    api = _uvicorn(app)
    health = _uvicorn(create_health_app(hub))
    servers = [asyncio.create_task(api.serve(sockets=[prepared.api]), name="api"),
               asyncio.create_task(health.serve(sockets=[prepared.health]), name="health")]
    log.info("fuyao-hub serving: REST %s:%d, agents %s:%d, health %s:%d, store %s",
             config.host, config.api_port, config.host, config.agent_port, config.host,
             config.health_port, _redact(config.store_url))
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *servers], return_when=asyncio.FIRST_COMPLETED)
    failed: BaseException | None = None
    for task in done:
        if task is not stopper and task.exception() is not None:
            failed = task.exception()
            log.error("listener failed: %s", failed)
    log.info("fuyao-hub stopping")
    api.should_exit = True
    health.should_exit = True
    if push is not None:
        await push.stop()
    await grpc_server.stop(grace=2.0)
    await asyncio.gather(*servers, return_exceptions=True)
    stopper.cancel()
    await hub.stop()
    if failed is not None:
        raise CannotStart(f"a listener failed: {failed}")
    log.info("fuyao-hub stopped")
    if hub.ha.lost is not None:
        raise Deposed(f"stopped after losing the leadership ({hub.ha.lost}); start it again "
                      "to rejoin as a standby")


def push_agents(config: HubConfig) -> PushAgents | None:
    """The push members' supervisor, when a key file for their credentials is configured."""
    if config.secrets_key_file is None:
        return None
    vault = Vault(config.home, load_key(config.secrets_key_file))
    ca = config.home / "pki" / "ca.crt" if config.agent_tls else None
    return PushAgents(vault, hub_address=f"127.0.0.1:{config.agent_port}", ca_file=ca,
                      home=config.home, watchdog_image=config.push_watchdog_image)


def _redact(url: str) -> str:
    """A store URL without its password, for logs."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url
