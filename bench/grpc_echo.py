"""A bare grpc.aio bidirectional-stream echo between two processes: the ceiling the hub's
agent channel is compared with.

``echo_rate(messages)`` starts ``python bench/grpc_echo.py serve`` (a grpc.aio server whose
one stream method writes back every message it reads) and runs the client in another
process (``client``): it writes ``messages`` PlaceTask-sized messages on one stream while
reading the echoes, and reports messages per second (one message = one request and its
echo). No protobuf service is generated: the method takes and returns raw bytes. Used by
``bench/e2e_bench.py`` in the same run as the hub it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

METHOD = "/bench.Echo/Echo"


def payload() -> bytes:
    """The bytes of a PlaceTask like the ones the hub sends (about 150 bytes)."""
    from fuyao.wire.v1 import agent_pb2 as pb

    msg = pb.HubMessage(place=pb.PlaceTask(
        task_id="0b7f3c3e-6a57-4d0e-9a0a-6f2f0c8d1e11", generation=1, name="job-12345",
        workload=pb.TaskWorkload(image="busybox", command=["sleep", "600"], cpu_milli=1000,
                                 memory_mib=1024, gpu_milli=1000, replicas=1,
                                 duration_seconds=600.0, failover="restart-elsewhere")))
    return msg.SerializeToString()


def _identity(data: bytes) -> bytes:
    return data


async def _echo(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


async def serve(port: int) -> None:
    """Serve the echo method on 127.0.0.1:``port`` until killed."""
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler("bench.Echo", {
        "Echo": grpc.stream_stream_rpc_method_handler(
            _echo, request_deserializer=_identity, response_serializer=_identity)})
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


async def client(port: int, messages: int) -> float:
    """Messages per second echoed through one stream."""
    body = payload()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await channel.channel_ready()
        call = channel.stream_stream(METHOD, request_serializer=_identity,
                                     response_deserializer=_identity)()

        async def write() -> None:
            for _ in range(messages):
                await call.write(body)
            await call.done_writing()

        started = time.perf_counter()
        writer = asyncio.create_task(write())
        received = 0
        while received < messages:
            reply = await call.read()
            if reply is grpc.aio.EOF:  # type: ignore[attr-defined]
                break
            received += 1
        await writer
        return received / (time.perf_counter() - started)


def echo_rate(messages: int = 20_000) -> float:
    """Run server and client as two processes; the client's messages per second."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()        # "ready"
        out = subprocess.run([sys.executable, __file__, "client", "--port", str(port),
                              "--messages", str(messages)],
                             capture_output=True, text=True, check=True, timeout=300)
        return float(json.loads(out.stdout)["messages_per_s"])
    finally:
        server.kill()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``serve --port P``, ``client --port P --messages N``, or ``run``."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["serve", "client", "run"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.mode == "serve":
        asyncio.run(serve(args.port))
    elif args.mode == "client":
        rate = asyncio.run(client(args.port, args.messages))
        print(json.dumps({"messages_per_s": round(rate, 1)}))
    else:
        print(json.dumps({"messages_per_s": round(echo_rate(args.messages), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
