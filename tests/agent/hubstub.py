"""A small real gRPC hub for agent tests: checks credentials, records messages, sends commands.

Not a fake of the hub's logic: just enough of ``AgentChannel`` on a real ``grpc.aio`` server
on 127.0.0.1 to watch what a real agent sends and in which order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc

CREDENTIAL = "cred-0123456789"


class HubStub(pb_grpc.AgentChannelServicer):
    """Records every call and message; tests push commands onto ``commands``."""

    def __init__(self, cluster: str = "east", token: str = "join-token") -> None:
        self.cluster = cluster
        self.token = token
        self.token_used = False
        self.revoked = False
        # ("register", request) / ("connect", authorization) / (message kind, message)
        self.log: list[tuple[str, Any]] = []
        self.commands: asyncio.Queue[pb.HubMessage] = asyncio.Queue()
        self._changed = asyncio.Event()

    async def Register(self, request: pb.RegisterRequest, context: Any) -> pb.RegisterResponse:
        self._record("register", request)
        if request.cluster != self.cluster or request.token != self.token:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or expired join token")
        if self.token_used:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, "join token already used")
        self.token_used = True
        return pb.RegisterResponse(cluster=request.cluster, credential=CREDENTIAL)

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: Any
    ) -> None:
        metadata = dict(context.invocation_metadata())
        self._record("connect", metadata.get("authorization"))
        if self.revoked or metadata.get("authorization") != f"Bearer {CREDENTIAL}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown cluster credential")
        await context.send_initial_metadata((("fuyao-cluster", "east"),))   # as the hub does

        async def receive() -> None:
            async for message in request_iterator:
                self._record(message.WhichOneof("msg"), getattr(message, message.WhichOneof("msg")))

        reader = asyncio.create_task(receive())
        try:
            while not reader.done():
                get = asyncio.create_task(self.commands.get())
                done, _ = await asyncio.wait({get, reader}, return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    await context.write(get.result())
                else:
                    get.cancel()
        finally:
            reader.cancel()

    def _record(self, kind: str, value: Any) -> None:
        self.log.append((kind, value))
        self._changed.set()

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.log]

    def of(self, kind: str) -> list[Any]:
        return [value for k, value in self.log if k == kind]

    async def wait_for(self, check: Callable[[HubStub], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not check(self):
                self._changed.clear()
                await self._changed.wait()


async def start_server(servicer: HubStub, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    pb_grpc.add_AgentChannelServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound
