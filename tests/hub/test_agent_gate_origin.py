"""``AgentGate.origin``: a relayed connection's real address, and an ended connection must
not take a newer connection's entry with it when the kernel hands the newer one the same
loopback port (its ``origin`` would fall back to 127.0.0.1 in audit records)."""

from __future__ import annotations

import asyncio

from hub.agentgate import AgentGate, _Connection

BOUND = 20.0


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _refused(_: str, __: int) -> None:
    return None


async def test_an_ended_connection_leaves_a_newer_connections_origin_alone() -> None:
    inner = await asyncio.start_server(_echo, "127.0.0.1", 0)
    gate = AgentGate(inner.sockets[0].getsockname()[1], _refused)
    port = await gate.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"x")
        async with asyncio.timeout(BOUND):
            assert await reader.readexactly(1) == b"x"
        [inner_port] = gate._by_inner_port
        local = writer.get_extra_info("sockname")
        assert gate.origin(f"ipv4:127.0.0.1:{inner_port}") == f"ipv4:127.0.0.1:{local[1]}"

        newer = _Connection("ipv4:10.0.0.9:5000", "10.0.0.9")
        gate._by_inner_port[inner_port] = newer      # the port now serves a newer connection
        writer.close()
        async with asyncio.timeout(BOUND):
            while gate._relays:
                await asyncio.sleep(0.01)
        assert gate.origin(f"ipv4:127.0.0.1:{inner_port}") == "ipv4:10.0.0.9:5000"
    finally:
        await gate.stop()
        inner.close()
