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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fuyao.aio import cancel_and_wait

log = logging.getLogger(__name__)
CHUNK = 256 * 1024
TLS_HANDSHAKE = 0x16           # first byte of a TLS handshake record (the ClientHello)
REPORT_EVERY = 60.0            # seconds between reports for one host


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


class AgentGate:
    """The public agent port: relays to gRPC, reports handshakes that never reached it."""

    def __init__(self, inner_port: int,
                 on_refused: Callable[[str, int], Awaitable[None]]) -> None:
        self.inner_port = inner_port
        self.on_refused = on_refused
        self._by_inner_port: dict[int, _Connection] = {}
        self._last_report: dict[str, tuple[float, int]] = {}
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket | None = None, host: str = "127.0.0.1",
                    port: int = 0) -> int:
        """Listen on ``sock`` (already bound) or ``host:port``; returns the port."""
        if sock is not None:
            self._server = await asyncio.start_server(self._accept, sock=sock)
        else:
            self._server = await asyncio.start_server(self._accept, host, port,
                                                      reuse_port=False)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        """Stop listening and end every relayed connection."""
        if self._server is not None:
            self._server.close()
        await cancel_and_wait(list(self._relays))

    def origin(self, peer: str) -> str:
        """The real address behind a gRPC ``context.peer()`` of a relayed connection (and
        that connection reached the hub); other peers unchanged."""
        port = peer.rpartition(":")[2]
        conn = self._by_inner_port.get(int(port)) if port.isdigit() else None
        if conn is None:
            return peer
        conn.reached = True
        return conn.source

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            await self._relay(reader, writer)
        except asyncio.CancelledError:
            pass    # ``stop``: asyncio's server would log a cancelled handler as an error
        finally:
            self._relays.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        source, host = grpc_peer(writer.get_extra_info("peername"))
        conn = _Connection(source, host)
        try:
            inner_reader, inner_writer = await asyncio.open_connection("127.0.0.1",
                                                                       self.inner_port)
        except OSError as exc:
            log.warning("agent gate: cannot reach the agent server: %s", exc)
            writer.close()
            return
        inner_port: int = inner_writer.get_extra_info("sockname")[1]
        self._by_inner_port[inner_port] = conn
        pipes = [asyncio.create_task(self._pipe(reader, inner_writer, conn)),
                 asyncio.create_task(self._pipe(inner_reader, writer, None))]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            for w in (writer, inner_writer):
                w.close()
            await asyncio.gather(*pipes, return_exceptions=True)
            # The port may already serve a newer connection: forget only this one's entry.
            if self._by_inner_port.get(inner_port) is conn:
                del self._by_inner_port[inner_port]
        if conn.tls and not conn.reached:
            await self._report(conn)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    conn: _Connection | None) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await src.read(CHUNK):
                if conn is not None and not conn.tls:
                    conn.tls = data[0] == TLS_HANDSHAKE
                dst.write(data)
                await dst.drain()

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
