"""Run a hub process: REST (8848), agent gRPC (8849), agent registration (8850) and
health/metrics (8851) in one loop.

``serve(config)`` is what ``fuyao-hub serve`` runs. It starts the ``Hub`` (store, state
rebuild, loops), then the listeners, and on SIGTERM/SIGINT stops them in reverse:
listeners first (agents reconnect elsewhere or later), then the loops, then the store, so
no acknowledged write is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Generator
from dataclasses import dataclass
from functools import partial

import grpc
import uvicorn
from fastapi import FastAPI

from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from hub import heap, native
from hub.agent_service import AgentChannel, Auth
from hub.agentgate import AgentGate
from hub.api import create_app, create_health_app
from hub.auth.actor import agent_actor
from hub.config import HubConfig
from hub.core import Hub
from hub.ha import Deposed
from hub.push.supervisor import PushAgents
from hub.push.vault import Vault, load_key
from hub.registration import AgentRegistration
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


def _grpc_server() -> grpc.aio.Server:
    return grpc.aio.server(options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        # gRPC turns SO_REUSEPORT on by default: a second hub could then share the port
        # and take half of the agents' connections.
        ("grpc.so_reuseport", 0),
    ])


def _bind(server: grpc.aio.Server, address: str, flag: str,
          credentials: grpc.ServerCredentials | None) -> None:
    bound = (server.add_secure_port(address, credentials) if credentials is not None
             else server.add_insecure_port(address))
    if bound == 0:
        raise CannotStart(f"cannot listen on {address} ({flag}): in use or not local")


def insecure_agent_server(hub: Hub, address: str) -> grpc.aio.Server:
    """The agent channel without TLS (``--agent-insecure``): the bearer credential."""
    log.warning("agent channel without TLS (--agent-insecure): agents authenticate with "
                "a bearer credential; use only behind a TLS-terminating proxy or on a "
                "trusted network")
    server = _grpc_server()
    pb_grpc.add_AgentChannelServicer_to_server(  # type: ignore[no-untyped-call]
        AgentChannel(hub, Auth.BEARER), server)
    _bind(server, address, "--agent-port", None)
    return server


def mtls_agent_server(hub: Hub, gate: AgentGate) -> tuple[grpc.aio.Server, int]:
    """The agent channel with mutual TLS (a client certificate signed by the hub's CA is
    required) on a loopback port behind ``gate``; returns it and the port."""
    assert hub.pki is not None
    server = _grpc_server()
    pb_grpc.add_AgentChannelServicer_to_server(  # type: ignore[no-untyped-call]
        AgentChannel(hub, Auth.CERTIFICATE, hub.agent_certs, gate.origin), server)
    credentials = grpc.ssl_server_credentials([(hub.pki.server_key, hub.pki.server_cert)],
                                              root_certificates=hub.pki.ca_cert,
                                              require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", credentials)
    if port == 0:
        raise CannotStart("cannot listen on a loopback port for the agent channel")
    return server, port


def registration_server(hub: Hub, address: str) -> grpc.aio.Server:
    """The registration listener on ``address``: server TLS only (agents have no client
    certificate yet); ``Enroll`` trades a join token and a CSR for one."""
    assert hub.agent_certs is not None
    server = _grpc_server()
    pb_grpc.add_AgentRegistrationServicer_to_server(  # type: ignore[no-untyped-call]
        AgentRegistration(hub, hub.agent_certs), server)
    _bind(server, address, "--register-port", _server_tls(hub))
    return server


def _server_tls(hub: Hub) -> grpc.ServerCredentials:
    """Server TLS with the hub's serving certificate, no client certificate asked for."""
    assert hub.pki is not None
    return grpc.ssl_server_credentials([(hub.pki.server_key, hub.pki.server_cert)])


def bearer_server(hub: Hub, address: str) -> grpc.aio.Server:
    """The deprecated bearer listener (``--agent-bearer-port``): the agent protocol as
    before certificates, server TLS only, for agents not yet upgraded; every stream warns,
    is audited and counted (``fuyao_agent_auth{method="bearer"}``)."""
    log.warning("--agent-bearer-port: agents may still connect with a bearer credential on "
                "%s (deprecated, removed in the next release)", address)
    server = _grpc_server()
    pb_grpc.add_AgentChannelServicer_to_server(  # type: ignore[no-untyped-call]
        AgentChannel(hub, Auth.BEARER_DEPRECATED), server)
    _bind(server, address, "--agent-bearer-port", _server_tls(hub))
    return server


@dataclass
class AgentListeners:
    """Every agent-facing listener of a hub, started."""

    servers: list[grpc.aio.Server]
    gate: AgentGate | None = None

    async def stop(self, grace: float) -> None:
        """Stop listening; streams get ``grace`` seconds."""
        if self.gate is not None:
            await self.gate.stop()
        await asyncio.gather(*(server.stop(grace=grace) for server in self.servers))


async def start_agent_listeners(hub: Hub, config: HubConfig,
                                agent_socket: socket.socket | None = None) -> AgentListeners:
    """Start the agent port (with TLS: ``hub.agentgate`` on ``agent_socket``, or on
    host:agent-port, relaying to mutual-TLS gRPC), the registration listener and the
    deprecated bearer listener when configured."""
    if hub.pki is None:
        listeners = AgentListeners([insecure_agent_server(
            hub, f"{config.host}:{config.agent_port}")])
    else:
        gate = AgentGate(0, partial(_refused_handshake, hub))
        server, gate.inner_port = mtls_agent_server(hub, gate)
        listeners = AgentListeners(
            [server, registration_server(hub, f"{config.host}:{config.register_port}")], gate)
        if config.agent_bearer_port:
            listeners.servers.append(
                bearer_server(hub, f"{config.host}:{config.agent_bearer_port}"))
    for grpc_server in listeners.servers:
        await grpc_server.start()
    if listeners.gate is not None:
        try:
            await listeners.gate.start(agent_socket, config.host, config.agent_port)
        except OSError as exc:
            await listeners.stop(0)
            raise CannotStart(f"cannot listen on {config.host}:{config.agent_port} "
                              f"(--agent-port): {exc.strerror or exc}") from exc
    return listeners


async def _refused_handshake(hub: Hub, source: str, skipped: int) -> None:
    """Audit a connection the TLS layer refused (``hub.agentgate`` saw it never reach us)."""
    result = ("refused: TLS handshake refused: no client certificate, or one this hub's CA "
              "did not sign, or past its validity")
    if skipped:
        result += f" ({skipped} more from this host since the last record)"
    log.warning("agent connection from %s: %s", source, result)
    hub.metrics.agent_auth.labels(method="certificate", result="refused").inc()
    await hub.audit("agent.connect", "", result, agent_actor("", source))


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
        agent_socket = prepared.agent_probe if hub.pki is not None else None
        if agent_socket is not None:
            prepared.agent_probe = None       # the gate listens on the socket bound at start
        prepared.release_agent_port()
        listeners = await start_agent_listeners(hub, config, agent_socket)
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
    log.info("fuyao-hub serving: REST %s:%d, agents %s:%d%s, health %s:%d, store %s",
             config.host, config.api_port, config.host, config.agent_port,
             f", agent registration {config.host}:{config.register_port}"
             if hub.pki is not None else "", config.host,
             config.health_port, _redact(config.store_url))
    log.info("placement engine: %s", native.STATE)
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
    await listeners.stop(grace=2.0)
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
                      register_address=f"127.0.0.1:{config.register_port}",
                      home=config.home, watchdog_image=config.push_watchdog_image)


def _redact(url: str) -> str:
    """A store URL without its password, for logs."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url
