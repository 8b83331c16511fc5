"""A raw protocol-level agent for hub tests: speaks AgentChannel over real gRPC, by hand.

Unlike the real agent (member_agent), it does exactly and only what a test tells it, so
tests can send out-of-order deltas, stale generations or nothing at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from fuyao.inventory import NodeInfo, ResourceAmounts
from fuyao.labels import devices_for, normalize_node
from fuyao.labelsets import encode
from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from member_agent.identity import new_key


async def enroll(register_address: str, ca_cert: bytes, cluster: str, token: str = "",
                 credential: str = "") -> tuple[bytes, bytes]:
    """Enroll on the hub's registration listener as an agent does: a new key, its CSR and
    the join token (or a bearer credential); returns (key, certificate) PEM."""
    key, csr = new_key()
    creds = grpc.ssl_channel_credentials(root_certificates=ca_cert)
    async with grpc.aio.secure_channel(register_address, creds) as channel:
        stub = pb_grpc.AgentRegistrationStub(channel)
        answer = await stub.Enroll(pb.EnrollRequest(cluster=cluster, token=token, csr=csr,
                                                    credential=credential))
    return key, answer.certificate


def gpu_node(name: str, product: str, gpus: int, cpu: int = 64, mem_gib: int = 512) -> NodeInfo:
    """A node as an agent would report it, labels normalized by the shared code."""
    raw = {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": product}
    norm = normalize_node(raw, {"nvidia.com/gpu": str(gpus)})
    res = ResourceAmounts(cpu_milli=cpu * 1000, memory_mib=mem_gib * 1024, pods=110)
    return NodeInfo(name=name, labels=norm.labels, allocatable=res, free=res,
                    devices=devices_for(name, norm))


class RawAgent:
    """One registered cluster's stream, driven by the test."""

    def __init__(self, address: str, cluster: str, ca_cert: bytes | None = None,
                 client: tuple[bytes, bytes] | None = None) -> None:
        """``client``: (key, certificate) PEM for mutual TLS (with ``ca_cert``)."""
        self.address = address
        self.cluster = cluster
        if ca_cert is None:
            self.channel = grpc.aio.insecure_channel(address)
        else:
            key, cert = client or (None, None)
            creds = grpc.ssl_channel_credentials(root_certificates=ca_cert, private_key=key,
                                                 certificate_chain=cert)
            self.channel = grpc.aio.secure_channel(address, creds)
        self.stub = pb_grpc.AgentChannelStub(self.channel)
        self.credential = ""
        self.outbox: asyncio.Queue[pb.AgentMessage | None] = asyncio.Queue()
        self.inbox: asyncio.Queue[pb.HubMessage] = asyncio.Queue()
        self.call: grpc.aio.StreamStreamCall | None = None  # type: ignore[type-arg]
        self._reader: asyncio.Task[None] | None = None
        self._beat: asyncio.Task[None] | None = None
        self.seq = 0

    async def register(self, token: str) -> str:
        """Register with a join token; keeps the credential."""
        resp = await self.stub.Register(pb.RegisterRequest(cluster=self.cluster, token=token))
        self.credential = resp.credential
        return resp.credential

    async def renew(self) -> pb.CertificateResponse:
        """Ask for the next certificate (mutual TLS); returns the hub's answer."""
        _, csr = new_key()
        answer: pb.CertificateResponse = await self.stub.Renew(pb.RenewRequest(csr=csr))
        return answer

    async def _messages(self) -> AsyncIterator[pb.AgentMessage]:
        # Like the real agent: nothing is written before the hub accepts the stream.
        assert self.call is not None
        await self.call.initial_metadata()
        while True:
            msg = await self.outbox.get()
            if msg is None:
                return
            yield msg

    async def connect(self, nodes: list[NodeInfo], tasks: list[pb.TaskReport] = (),  # type: ignore[assignment]
                      credential: str | None = None, features: tuple[str, ...] = (),
                      columns: bool = False, label_sets: bool = False) -> None:
        """Open the stream and send Hello (listing ``features``) + full Inventory (devices as
        ``DeviceColumns`` where they can be, with ``columns``; labels once per set, with
        ``label_sets``)."""
        cred = self.credential if credential is None else credential
        self.call = self.stub.Connect(self._messages(),
                                      metadata=(("authorization", f"Bearer {cred}"),))
        self._reader = asyncio.create_task(self._read())
        self._beat = asyncio.create_task(self._heartbeats())
        self.send(pb.AgentMessage(hello=pb.Hello(agent_version="test", backend="raw",
                                                 features=list(features))))
        self.seq = 1
        wire, sets = encode(nodes, columns, label_sets)
        self.send(pb.AgentMessage(inventory=pb.Inventory(
            seq=self.seq, nodes=wire, label_sets=sets, tasks=list(tasks))))

    async def _read(self) -> None:
        assert self.call is not None
        try:
            async for msg in self.call:
                await self.inbox.put(msg)
        except grpc.aio.AioRpcError:
            pass    # the test reads the status with status()

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            self.send(pb.AgentMessage(heartbeat=pb.Heartbeat()))

    def send(self, msg: pb.AgentMessage) -> None:
        """Queue a message on the stream."""
        self.outbox.put_nowait(msg)

    def delta(self, nodes: list[NodeInfo], seq: int | None = None, columns: bool = False,
              label_sets: bool = False) -> None:
        """Send an inventory delta (next seq unless given)."""
        self.seq = self.seq + 1 if seq is None else seq
        wire, sets = encode(nodes, columns, label_sets)
        self.send(pb.AgentMessage(delta=pb.InventoryDelta(
            seq=self.seq, upserted=wire, label_sets=sets)))

    def report(self, task_id: str, generation: int, phase: int, node: str = "",
               reason: str = "") -> None:
        """Send a task report."""
        self.send(pb.AgentMessage(task=pb.TaskReport(task_id=task_id, generation=generation,
                                                     phase=phase, node=node, reason=reason)))

    async def expect(self, kind: str, timeout: float = 5.0) -> pb.HubMessage:
        """The next hub message, which must be of ``kind`` (place, cancel, resync)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:   # heartbeat acks come all the time; a test waits for something else
            left = deadline - asyncio.get_running_loop().time()
            msg = await asyncio.wait_for(self.inbox.get(), max(left, 0.001))
            if msg.WhichOneof("msg") != "ack" or kind == "ack":
                break
        assert msg.WhichOneof("msg") == kind, msg
        return msg

    async def status(self) -> grpc.StatusCode:
        """Wait for the stream to end and return its status code."""
        assert self.call is not None
        code: grpc.StatusCode = await self.call.code()
        return code

    async def close(self) -> None:
        """End the stream and the channel."""
        self.outbox.put_nowait(None)
        for task in (self._reader, self._beat):
            if task is not None:
                task.cancel()
        await self.channel.close()
