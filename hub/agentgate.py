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

The event loop only accepts connections, connects each to gRPC and records the mapping.
The bytes are relayed by ``hub.splice_relay`` (mode ``splice``: one thread, in the kernel,
Linux); mode ``asyncio`` relays them on the event loop (two tasks a connection, a read,
write and drain a chunk), the fallback where ``os.splice`` is missing and the baseline
``bench/gate_bench.py`` measures against.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from hub import splice_relay

log = logging.getLogger(__name__)
CHUNK = 256 * 1024
REPORT_EVERY = 60.0            # seconds between reports for one host
Mode = Literal["splice", "asyncio"]


@dataclass
class _Connection:
    source: str                # as gRPC names peers: ipv4:HOST:PORT / ipv6:[HOST]:PORT
    host: str
    reached: bool = False      # a handler saw it: not a refused handshake


def grpc_peer(address: tuple[str, int] | tuple[str, int, int, int]) -> tuple[str, str]:
    """``(peer, host)`` for a socket address, in gRPC's ``context.peer()`` form."""
    host, port = address[0], address[1]
    return (f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"), host


class AgentGate:
    """The public agent port: relays to gRPC, reports handshakes that never reached it."""

    def __init__(self, inner_port: int, on_refused: Callable[[str, int], Awaitable[None]],
                 mode: Mode | None = None) -> None:
        self.inner_port = inner_port
        self.on_refused = on_refused
        self.mode: Mode = mode or ("splice" if splice_relay.AVAILABLE else "asyncio")
        self._by_inner_port: dict[int, _Connection] = {}
        self._last_report: dict[str, tuple[float, int]] = {}
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._relay: splice_relay.SpliceRelay | None = None

    async def start(self, sock: socket.socket) -> int:
        """Accept on ``sock`` (bound; ``hub.startup.bind``); returns its port."""
        sock.setblocking(False)
        sock.listen(2048)
        self._listener = sock
        if self.mode == "splice":
            self._relay = splice_relay.SpliceRelay()
        self._spawn(self._accept(sock))
        bound: int = sock.getsockname()[1]
        return bound

    async def stop(self) -> None:
        """Stop listening and end every relayed connection."""
        if self._listener is not None:
            self._listener.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._relay is not None:
            await asyncio.to_thread(self._relay.close)
            self._relay = None
        self._by_inner_port.clear()

    def origin(self, peer: str) -> str:
        """The real address behind a gRPC ``context.peer()`` of a relayed connection (and
        that connection reached the hub); other peers unchanged."""
        port = peer.rpartition(":")[2]
        conn = self._by_inner_port.get(int(port)) if port.isdigit() else None
        if conn is None:
            return peer
        conn.reached = True
        return conn.source

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                outer, address = await loop.sock_accept(listener)
            except OSError as exc:      # out of descriptors, an aborted connection, ``stop``
                if listener.fileno() == -1:
                    return
                log.warning("agent gate: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._spawn(self._admit(outer, address))

    async def _admit(self, outer: socket.socket, address: Any) -> None:
        """Connect ``outer`` to gRPC, record which loopback port stands for it, relay."""
        conn = _Connection(*grpc_peer(address))
        inner = await self._connect_inner(outer)
        if inner is None:
            return
        inner_port: int = inner.getsockname()[1]
        self._by_inner_port[inner_port] = conn
        if self._relay is not None:
            try:
                self._relay.add(outer, inner, self._threadsafe_closed(conn, inner_port))
            except OSError as exc:      # out of descriptors for its pipes
                log.warning("agent gate: cannot relay a connection: %s", exc)
                self._by_inner_port.pop(inner_port, None)
                _close(outer, inner)
            return
        try:
            tls = await _pipe_streams(outer, inner)
        finally:
            self._by_inner_port.pop(inner_port, None)
        await self._closed(conn, tls)

    async def _connect_inner(self, outer: socket.socket) -> socket.socket | None:
        """A connection to the gRPC server for ``outer`` (closed with it when there is none)."""
        inner = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        inner.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(inner, ("127.0.0.1", self.inner_port))
        except OSError as exc:
            log.warning("agent gate: cannot reach the agent server: %s", exc)
            _close(outer, inner)
            return None
        except asyncio.CancelledError:
            _close(outer, inner)
            raise
        return inner

    def _threadsafe_closed(self, conn: _Connection, inner_port: int) -> splice_relay.Closed:
        """``on_closed`` for the relay thread: forget the port and judge on the event loop."""
        loop = asyncio.get_running_loop()

        def closed(tls: bool) -> None:
            self._by_inner_port.pop(inner_port, None)
            if self._relay is not None:       # not stopped meanwhile
                self._spawn(self._closed(conn, tls))

        def from_thread(tls: bool) -> None:
            with contextlib.suppress(RuntimeError):     # the loop has closed: hub stopped
                loop.call_soon_threadsafe(closed, tls)
        return from_thread

    async def _closed(self, conn: _Connection, tls: bool) -> None:
        if tls and not conn.reached:
            await self._report(conn)

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


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        sock.close()


async def _pipe_streams(outer: socket.socket, inner: socket.socket) -> bool:
    """Relay ``outer`` <-> ``inner`` on the event loop until either ends (mode ``asyncio``);
    whether the client began a TLS handshake."""
    reader, writer = await asyncio.open_connection(sock=outer)
    inner_reader, inner_writer = await asyncio.open_connection(sock=inner)
    first = asyncio.get_running_loop().create_future()
    pipes = [asyncio.create_task(_pipe(reader, inner_writer, first)),
             asyncio.create_task(_pipe(inner_reader, writer, None))]
    try:
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pipe in pipes:
            pipe.cancel()
        for w in (writer, inner_writer):
            w.close()
        await asyncio.gather(*pipes, return_exceptions=True)
    return first.done() and bool(first.result())


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                first: asyncio.Future[bool] | None) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await src.read(CHUNK):
            if first is not None and not first.done():
                first.set_result(data[:1] == splice_relay.TLS_HANDSHAKE)
            dst.write(data)
            await dst.drain()
