"""A TCP relay in front of the mutual-TLS agent port that audits refused handshakes.

Python gRPC checks client certificates inside its TLS layer: a connection without one, with
one the hub's CA did not sign, or past its X.509 validity is refused before any hub code
runs, so neither the refusal nor its address would reach the audit log. ``AgentGate``
listens on the public agent port (the socket ``hub.startup`` bound) and relays each
connection byte for byte to the gRPC server on a loopback port; TLS stays end to end
between the agent and gRPC, and the gate sees only ciphertext. Handlers call ``origin``
with ``context.peer()`` to learn the real address (which also marks the connection as having
reached the hub). A connection that began a TLS handshake but closed without reaching a
handler is reported to ``on_refused`` with its address: at most one report per host a
minute, the next one counting those in between. Started by ``hub.server``.

The relay runs on the event loop as a pair of ``asyncio.Protocol`` ends: a chunk read on one
socket is written to the other from the read callback, with no task, future or await per
chunk (the stream relay this replaced woke two tasks a chunk, and at 100 members that was a
fifth of the hub's CPU). Backpressure is the transports' own: when one end's write buffer
passes its high-water mark, the other end stops reading until it drains. When either end
closes or fails, both close (after flushing what was already read), as before.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fuyao.aio import cancel_and_wait

log = logging.getLogger(__name__)
TLS_HANDSHAKE = 0x16           # first byte of a TLS handshake record (the ClientHello)
REPORT_EVERY = 60.0            # seconds between reports for one host
CONNECT_TIMEOUT = 10.0         # seconds to reach the gRPC server on loopback


@dataclass
class _Connection:
    source: str                # as gRPC names peers: ipv4:HOST:PORT / ipv6:[HOST]:PORT
    host: str
    tls: bool = False          # the client began a TLS handshake
    reached: bool = False      # a handler saw it: not a refused handshake


def grpc_peer(address: tuple[str, int] | tuple[str, int, int, int]) -> tuple[str, str]:
    """``(peer, host)`` for a socket address, in gRPC's ``context.peer()`` form."""
    host, port = address[0], address[1]
    return (f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"), host


class _End(asyncio.Protocol):
    """One socket of a relayed connection: what it reads, the other end writes."""

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.peer: _End | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self is self.relay.outer:
            self.relay.accepted(transport)

    def data_received(self, data: bytes) -> None:
        self.relay.forward(self, data)

    def eof_received(self) -> bool:
        self.relay.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.close()

    # Backpressure: this end's write buffer is full, so the other end stops reading.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Relay:
    """An agent's connection (``outer``) and the gate's to gRPC (``inner``), joined."""

    def __init__(self, gate: AgentGate) -> None:
        self.gate = gate
        self.outer = _End(self)
        self.inner = _End(self)
        self.outer.peer, self.inner.peer = self.inner, self.outer
        self.conn: _Connection | None = None
        self.inner_port = 0
        self.first = True              # the next chunk from the agent is its first
        self.closed = False

    def forward(self, end: _End, data: bytes) -> None:
        if end is self.outer and self.first:
            self.first = False
            assert self.conn is not None
            self.conn.tls = data[0] == TLS_HANDSHAKE
        other = end.peer
        assert other is not None and other.transport is not None    # outer waits for inner
        if not self.closed:
            other.transport.write(data)

    def accepted(self, outer: asyncio.Transport) -> None:
        """The agent connected: hold its bytes until the loopback leg to gRPC is up."""
        outer.pause_reading()
        self.conn = _Connection(*grpc_peer(outer.get_extra_info("peername")))
        self.gate._spawn(self.gate._join(self))

    def joined(self, port: int) -> None:
        """The loopback connection to gRPC is up: relay both ways."""
        assert self.conn is not None and self.outer.transport is not None
        self.inner_port = port
        self.gate._by_inner_port[port] = self.conn
        self.outer.transport.resume_reading()

    def close(self) -> None:
        """End both sockets (once), forget the port, report a handshake that never arrived."""
        if self.closed:
            return
        self.closed = True
        for end in (self.outer, self.inner):
            if end.transport is not None:
                end.transport.close()        # flushes what is buffered, then closes
        self.gate._relays.discard(self)
        # The port may already serve a newer connection: forget only this one's entry.
        if self.conn is not None and self.gate._by_inner_port.get(self.inner_port) is self.conn:
            del self.gate._by_inner_port[self.inner_port]
        if self.conn is not None and self.conn.tls and not self.conn.reached:
            self.gate._spawn(self.gate._report(self.conn))


class AgentGate:
    """The public agent port: relays to gRPC, reports handshakes that never reached it."""

    def __init__(self, inner_port: int,
                 on_refused: Callable[[str, int], Awaitable[None]]) -> None:
        self.inner_port = inner_port
        self.on_refused = on_refused
        self._by_inner_port: dict[int, _Connection] = {}
        self._last_report: dict[str, tuple[float, int]] = {}
        self._server: asyncio.Server | None = None
        self._relays: set[_Relay] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket | None = None, host: str = "127.0.0.1",
                    port: int = 0) -> int:
        """Listen on ``sock`` (already bound) or ``host:port``; returns the port."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(self._accept, sock=sock)
        else:
            self._server = await loop.create_server(self._accept, host, port,
                                                    reuse_port=False)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        """Stop listening and end every relayed connection."""
        if self._server is not None:
            self._server.close()
        for relay in list(self._relays):
            relay.close()
        await cancel_and_wait(list(self._tasks))

    def origin(self, peer: str) -> str:
        """The real address behind a gRPC ``context.peer()`` of a relayed connection (and
        that connection reached the hub); other peers unchanged."""
        port = peer.rpartition(":")[2]
        conn = self._by_inner_port.get(int(port)) if port.isdigit() else None
        if conn is None:
            return peer
        conn.reached = True
        return conn.source

    def _accept(self) -> _End:
        """A new agent connection (the protocol for it; ``_Relay.accepted`` follows)."""
        relay = _Relay(self)
        self._relays.add(relay)
        return relay.outer

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _join(self, relay: _Relay) -> None:
        """Connect the relay's inner end to gRPC's loopback port."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                transport, _ = await loop.create_connection(
                    lambda: relay.inner, "127.0.0.1", self.inner_port)
        except (OSError, TimeoutError) as exc:
            log.warning("agent gate: cannot reach the agent server: %s", exc)
            relay.close()
            return
        if relay.closed:                         # the agent left (or ``stop``) meanwhile
            transport.close()
            return
        relay.joined(transport.get_extra_info("sockname")[1])

    async def _report(self, conn: _Connection) -> None:
        now = time.monotonic()
        last, skipped = self._last_report.get(conn.host, (-REPORT_EVERY, 0))
        if now - last < REPORT_EVERY:
            self._last_report[conn.host] = (last, skipped + 1)
            return
        self._last_report[conn.host] = (now, 0)
        if len(self._last_report) > 10_000:     # bounded: forget the oldest hosts
            for key in sorted(self._last_report, key=lambda k: self._last_report[k][0])[:5000]:
                del self._last_report[key]
        try:
            await self.on_refused(conn.source, skipped)
        except Exception:
            log.exception("agent gate: could not report a refused handshake")
