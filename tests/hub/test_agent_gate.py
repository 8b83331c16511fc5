"""The agent port's relay (``hub.agentgate``): bytes arrive unchanged both ways, the gate
buffers a bounded amount for a slow reader, a relayed gRPC peer maps back to the agent's real
address, a TLS handshake that never reached a handler is reported (once a minute per host),
and ``stop`` ends every connection. The mutual-TLS path through gRPC is in
``test_agent_certificates``; the origin of a reused loopback port in
``test_agent_gate_origin``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.agentgate import AgentGate

HELLO = b"\x16\x03\x01" + bytes(200)       # looks like the start of a ClientHello
BOUND = 20.0                               # seconds: a generous bound, never a measurement


@dataclass
class Behind:
    """An echo server behind a gate, and what the gate reported."""

    gate: AgentGate
    port: int
    peers: list[tuple[str, int]] = field(default_factory=list)
    refused: list[tuple[str, int]] = field(default_factory=list)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def settle(self) -> None:
        """Until the gate relays nothing (its closing reports are scheduled)."""
        async with asyncio.timeout(BOUND):
            while self.gate._relays or self.gate._tasks:
                await asyncio.sleep(0.01)


async def _echo_server(peers: list[tuple[str, int]]) -> asyncio.Server:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[:2])
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(echo, "127.0.0.1", 0)


@pytest.fixture
async def behind() -> AsyncIterator[Behind]:
    peers: list[tuple[str, int]] = []
    server = await _echo_server(peers)
    refused: list[tuple[str, int]] = []

    async def on_refused(source: str, skipped: int) -> None:
        refused.append((source, skipped))

    gate = AgentGate(server.sockets[0].getsockname()[1], on_refused)
    port = await gate.start(socket.create_server(("127.0.0.1", 0)))
    yield Behind(gate, port, peers, refused)
    await gate.stop()
    server.close()


async def test_bytes_arrive_unchanged_both_ways(behind: Behind) -> None:
    payload = os.urandom(3 * 1024 * 1024 + 17)
    reader, writer = await behind.connect()
    writer.write(payload)
    async with asyncio.timeout(BOUND):
        echoed = await reader.readexactly(len(payload))
    writer.close()
    assert echoed == payload


async def test_many_connections_at_once_each_get_their_own_bytes(behind: Behind) -> None:
    async def one(n: int) -> bytes:
        reader, writer = await behind.connect()
        message = f"connection {n} ".encode() * 1000
        writer.write(message)
        echoed = await reader.readexactly(len(message))
        writer.close()
        return echoed

    async with asyncio.timeout(BOUND):
        echoed = await asyncio.gather(*(one(n) for n in range(20)))
    assert echoed == [f"connection {n} ".encode() * 1000 for n in range(20)]


async def test_a_slow_reader_holds_the_sender_back_instead_of_filling_the_hub() -> None:
    """gRPC not reading: the gate stops reading the agent, its buffer stays small, and every
    byte arrives once gRPC reads again."""
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put((reader, writer))

    server = await asyncio.start_server(hold, "127.0.0.1", 0, limit=64 * 1024)
    gate = AgentGate(server.sockets[0].getsockname()[1], _ignore)
    port = await gate.start()
    payload = os.urandom(32 * 1024 * 1024)
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(payload)
        sending = asyncio.create_task(writer.drain())
        async with asyncio.timeout(BOUND):
            inner_reader, _inner_writer = await accepted.get()
        await asyncio.sleep(0.5)                # the sender runs into the backpressure
        [relay] = gate._relays
        assert relay.inner.transport is not None
        assert relay.inner.transport.get_write_buffer_size() <= 1024 * 1024
        assert not sending.done()               # the agent is held back, not buffered for
        async with asyncio.timeout(BOUND):
            received = await inner_reader.readexactly(len(payload))
            await sending
        assert received == payload
        writer.close()
    finally:
        await gate.stop()
        server.close()


async def _ignore(_source: str, _skipped: int) -> None:
    return None


async def test_a_relayed_peer_maps_back_to_the_real_address(behind: Behind) -> None:
    reader, writer = await behind.connect()
    writer.write(b"ping")
    async with asyncio.timeout(BOUND):
        await reader.readexactly(4)
    inner_host, inner_port = behind.peers[0]
    real = writer.get_extra_info("sockname")[1]
    assert behind.gate.origin(f"ipv4:{inner_host}:{inner_port}") == f"ipv4:127.0.0.1:{real}"
    assert behind.gate.origin("ipv4:10.0.0.1:5") == "ipv4:10.0.0.1:5"     # not relayed
    writer.close()
    await behind.settle()
    assert behind.refused == []      # it reached a handler: not a refused handshake


async def test_a_handshake_that_never_reached_a_handler_is_reported_once_a_minute(
        behind: Behind) -> None:
    sources = []
    for _ in range(3):
        reader, writer = await behind.connect()
        sources.append(f"ipv4:127.0.0.1:{writer.get_extra_info('sockname')[1]}")
        writer.write(HELLO)
        async with asyncio.timeout(BOUND):
            await reader.readexactly(len(HELLO))
        writer.close()
        await behind.settle()
    assert behind.refused == [(sources[0], 0)]
    assert behind.gate._last_report["127.0.0.1"][1] == 2    # counted for the next record


async def test_a_connection_that_did_not_begin_tls_is_not_reported(behind: Behind) -> None:
    reader, writer = await behind.connect()
    writer.write(b"GET / HTTP/1.1\r\n\r\n" + HELLO)    # a later chunk starting 0x16 is not TLS
    async with asyncio.timeout(BOUND):
        await reader.readexactly(18 + len(HELLO))
    writer.close()
    reader, writer = await behind.connect()       # and one that sent nothing at all
    writer.close()
    await behind.settle()
    assert behind.refused == []


async def test_an_unreachable_grpc_server_closes_the_agents_connection() -> None:
    spare = socket.create_server(("127.0.0.1", 0))
    dead_port = spare.getsockname()[1]
    spare.close()                                  # nothing listens there now
    gate = AgentGate(dead_port, _ignore)
    port = await gate.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HELLO)
        async with asyncio.timeout(BOUND):
            # closed with our bytes unread: the kernel may answer with a reset
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
        writer.close()
        async with asyncio.timeout(BOUND):
            while gate._relays:
                await asyncio.sleep(0.01)
    finally:
        await gate.stop()


async def test_stop_ends_every_relayed_connection(behind: Behind) -> None:
    streams = [await behind.connect() for _ in range(3)]
    for reader, writer in streams:
        writer.write(b"x")
        await reader.readexactly(1)
    async with asyncio.timeout(BOUND):
        await behind.gate.stop()
    for reader, writer in streams:
        async with asyncio.timeout(BOUND):
            assert await reader.read() == b""
        writer.close()
    with pytest.raises(OSError):
        await behind.connect()
    assert behind.refused == []


async def _round_trip(up: list[bytes], down: list[bytes]) -> tuple[bytes, bytes, list[str]]:
    """Send ``up`` through a gate to a server that sends ``down`` back and then closes;
    what the server got, what the client got, and what the gate reported."""
    got_up = bytearray()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got_up.extend(await reader.readexactly(sum(map(len, up))))
        for chunk in down:
            writer.write(chunk)
            await writer.drain()
        writer.close()

    reports: list[str] = []

    async def on_refused(source: str, _skipped: int) -> None:
        reports.append(source)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    gate = AgentGate(server.sockets[0].getsockname()[1], on_refused)
    port = await gate.start()
    try:
        async with asyncio.timeout(BOUND):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for chunk in up:
                writer.write(chunk)
                await writer.drain()
            got_down = await reader.read()
            writer.close()
            while gate._relays or gate._tasks:
                await asyncio.sleep(0.01)
    finally:
        await gate.stop()
        server.close()
    return bytes(got_up), got_down, reports


@settings(max_examples=25)
@given(up=st.lists(st.binary(min_size=1, max_size=200_000), max_size=6),
       down=st.lists(st.binary(min_size=1, max_size=200_000), max_size=6))
def test_the_relay_moves_any_bytes_unchanged_both_ways(up: list[bytes],
                                                        down: list[bytes]) -> None:
    got_up, got_down, reports = asyncio.run(_round_trip(up, down))
    assert got_up == b"".join(up)
    assert got_down == b"".join(down)
    # Nothing reached a handler here: a connection whose first byte began a TLS handshake
    # is reported, any other is not.
    assert len(reports) == (1 if up and up[0][:1] == b"\x16" else 0)
