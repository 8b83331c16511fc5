"""The agent port's relay (``hub.agentgate``), in both modes: bytes arrive unchanged both
ways, a relayed gRPC peer maps back to the agent's real address, a TLS handshake that never
reached a handler is reported (once a minute per host), and ``stop`` ends every connection.
The mutual-TLS path through gRPC is in ``test_agent_certificates``."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub import splice_relay
from hub.agentgate import AgentGate, Mode

MODES: list[Mode] = ["asyncio", "splice"] if splice_relay.AVAILABLE else ["asyncio"]
HELLO = b"\x16\x03\x01" + bytes(200)       # looks like the start of a ClientHello


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
        for _ in range(200):
            if not self.gate._by_inner_port:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)


@pytest.fixture(params=MODES)
async def behind(request: pytest.FixtureRequest) -> AsyncIterator[Behind]:
    peers: list[tuple[str, int]] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[:2])
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    refused: list[tuple[str, int]] = []

    async def on_refused(source: str, skipped: int) -> None:
        refused.append((source, skipped))

    gate = AgentGate(server.sockets[0].getsockname()[1], on_refused, mode=request.param)
    listener = socket.create_server(("127.0.0.1", 0))
    port = await gate.start(listener)
    yield Behind(gate, port, peers, refused)
    await gate.stop()
    server.close()


async def test_bytes_arrive_unchanged_both_ways(behind: Behind) -> None:
    payload = os.urandom(3 * 1024 * 1024 + 17)
    reader, writer = await behind.connect()
    writer.write(payload)
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

    echoed = await asyncio.gather(*(one(n) for n in range(20)))
    assert echoed == [f"connection {n} ".encode() * 1000 for n in range(20)]


async def test_a_relayed_peer_maps_back_to_the_real_address(behind: Behind) -> None:
    reader, writer = await behind.connect()
    writer.write(b"ping")
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
        await reader.readexactly(len(HELLO))
        writer.close()
        await behind.settle()
    assert behind.refused == [(sources[0], 0)]
    assert behind.gate._last_report["127.0.0.1"][1] == 2    # counted for the next record


async def test_a_connection_that_did_not_begin_tls_is_not_reported(behind: Behind) -> None:
    reader, writer = await behind.connect()
    writer.write(b"GET / HTTP/1.1\r\n\r\n")
    await reader.readexactly(18)
    writer.close()
    reader, writer = await behind.connect()       # and one that sent nothing at all
    writer.close()
    await behind.settle()
    assert behind.refused == []


async def test_stop_ends_every_relayed_connection(behind: Behind) -> None:
    streams = [await behind.connect() for _ in range(3)]
    for reader, writer in streams:
        writer.write(b"x")
        await reader.readexactly(1)
    await asyncio.wait_for(behind.gate.stop(), 10)
    for reader, writer in streams:
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    with pytest.raises(OSError):
        await behind.connect()
    assert behind.refused == []


@pytest.mark.skipif(not splice_relay.AVAILABLE, reason="os.splice is Linux only")
@settings(max_examples=30, deadline=None)
@given(up=st.lists(st.binary(min_size=1, max_size=200_000), max_size=6),
       down=st.lists(st.binary(min_size=1, max_size=200_000), max_size=6))
def test_the_kernel_relay_moves_any_bytes_unchanged_both_ways(up: list[bytes],
                                                               down: list[bytes]) -> None:
    client, outer = socket.socketpair()
    inner, server = socket.socketpair()
    closed: list[bool] = []
    relay = splice_relay.SpliceRelay()
    try:
        relay.add(outer, inner, closed.append)
        for sender, receiver, chunks in ((client, server, up), (server, client, down)):
            sender.settimeout(10)
            receiver.settimeout(10)
            sending = threading.Thread(target=sender.sendall, args=(b"".join(chunks),))
            sending.start()
            received = b""
            while len(received) < sum(map(len, chunks)):
                received += receiver.recv(1 << 20)
            sending.join()
            assert received == b"".join(chunks)
        client.close()
        assert server.recv(1) == b""           # one side ended: the relay ended both
    finally:
        relay.close()
        client.close()
        server.close()
    assert closed == [up[:1] != [] and up[0][:1] == b"\x16"]
