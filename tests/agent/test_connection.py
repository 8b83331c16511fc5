"""The agent against a real gRPC server on loopback: order, seq numbers, resync, reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fuyao.errors import Conflict, Unauthenticated
from fuyao.fleetfile import Fleet, FleetNode
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.sim.backend import SimBackend
from member_agent.connection import Agent, AgentConfig
from tests.agent.hubstub import CREDENTIAL, HubStub, start_server

T4 = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.memory": "15360"}
FLEET = Fleet(
    source="test",
    cluster_labels={"fuyao.io/region": "cn-east"},
    nodes=(
        FleetNode("t4-0", dict(T4), {"cpu": "16", "memory": "64Gi", "pods": "110",
                                     "nvidia.com/gpu": "2"}),
        FleetNode("cpu-0", {}, {"cpu": "8", "memory": "32Gi", "pods": "110"}),
    ),
)


def make_agent(tmp_path: Path, port: int, *, token: str = "join-token") -> Agent:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    config = AgentConfig(
        hub=f"127.0.0.1:{port}",
        cluster="east",
        state_dir=tmp_path / "state",
        token_file=token_file,
        heartbeat_interval=0.05,
        backoff_initial=0.02,
        backoff_max=0.1,
        healthy_after=60.0,
    )
    return Agent(config, SimBackend(FLEET, time_scale=0.01, retry_interval=0.05))


@contextlib.asynccontextmanager
async def running(agent: Agent) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(agent.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


@pytest.fixture
async def hub() -> AsyncIterator[tuple[HubStub, int]]:
    servicer = HubStub()
    server, port = await start_server(servicer)
    yield servicer, port
    await server.stop(0)


def place(task_id: str, gen: int = 1, duration: float = 0.0) -> pb.HubMessage:
    workload = pb.TaskWorkload(cpu_milli=1000, memory_mib=1024, gpu_milli=1000, replicas=1,
                               duration_seconds=duration)
    return pb.HubMessage(place=pb.PlaceTask(task_id=task_id, generation=gen, name=task_id,
                                            workload=workload))


def after_inventory(hub: HubStub) -> list[tuple[str, object]]:
    """Messages after the last full inventory, heartbeats left out."""
    last = max(i for i, (kind, _) in enumerate(hub.log) if kind == "inventory")
    return [(k, v) for k, v in hub.log[last + 1:] if k != "heartbeat"]


def has_phase(hub: HubStub, task_id: str, phase: int, gen: int = 1) -> bool:
    return any(r.task_id == task_id and r.generation == gen and r.phase == phase
               for r in hub.of("task"))


async def test_registers_then_hello_then_full_inventory(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    agent = make_agent(tmp_path, port)
    async with running(agent):
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
    assert servicer.kinds()[:4] == ["register", "connect", "hello", "inventory"]
    assert servicer.of("connect") == [f"Bearer {CREDENTIAL}"]
    hello = servicer.of("hello")[0]
    assert hello.backend == "sim"
    assert dict(hello.cluster_labels) == {"fuyao.io/region": "cn-east"}
    inventory = servicer.of("inventory")[0]
    assert inventory.seq == 1
    assert sorted(n.name for n in inventory.nodes) == ["cpu-0", "t4-0"]
    t4 = next(n for n in inventory.nodes if n.name == "t4-0")
    assert t4.labels["fuyao.io/gpu-model"] == "T4"
    assert [d.free_milli for d in t4.devices] == [1000, 1000]
    saved = agent.store.path
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    assert CREDENTIAL in saved.read_text()


async def test_saved_credential_skips_registration(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    async with running(make_agent(tmp_path, port)):
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
    servicer.log.clear()
    async with running(make_agent(tmp_path, port)):  # same state dir, token already used
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
    assert "register" not in servicer.kinds()


async def test_delta_comes_before_bound_and_seq_counts_up(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    async with running(make_agent(tmp_path, port)):
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
        await servicer.commands.put(place("job-1", duration=5))  # 5 s x 0.01
        await servicer.wait_for(lambda h: has_phase(h, "job-1", pb.TASK_PHASE_SUCCEEDED))
    flow = [
        (kind, value.phase if kind == "task" else value.seq)  # type: ignore[attr-defined]
        for kind, value in after_inventory(servicer)
    ]
    assert flow == [
        ("task", pb.TASK_PHASE_ACCEPTED),
        ("delta", 2),
        ("task", pb.TASK_PHASE_BOUND),
        ("task", pb.TASK_PHASE_RUNNING),
        ("delta", 3),
        ("task", pb.TASK_PHASE_SUCCEEDED),
    ]
    taken, freed = servicer.of("delta")
    assert [d.free_milli for d in taken.upserted[0].devices] == [0, 1000]
    assert [d.free_milli for d in freed.upserted[0].devices] == [1000, 1000]
    assert servicer.of("task")[1].node == "t4-0"


async def test_resync_request_gets_a_fresh_inventory(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    async with running(make_agent(tmp_path, port)):
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
        await servicer.commands.put(place("job-1"))
        await servicer.wait_for(lambda h: has_phase(h, "job-1", pb.TASK_PHASE_RUNNING))
        await servicer.commands.put(pb.HubMessage(resync=pb.ResyncRequest(reason="gap")))
        await servicer.wait_for(lambda h: len(h.of("inventory")) == 2)
        await servicer.commands.put(pb.HubMessage(cancel=pb.CancelTask(task_id="job-1",
                                                                       generation=1)))
        await servicer.wait_for(lambda h: has_phase(h, "job-1", pb.TASK_PHASE_CANCELLED))
    first, second = servicer.of("inventory")
    assert second.seq == 3  # inventory 1, delta 2, then the new base
    assert [(t.task_id, t.phase) for t in second.tasks] == [("job-1", pb.TASK_PHASE_RUNNING)]
    t4 = next(n for n in second.nodes if n.name == "t4-0")
    assert [d.free_milli for d in t4.devices] == [0, 1000]
    assert [d.seq for d in servicer.of("delta")] == [2, 4]
    assert first.seq == 1


async def test_heartbeats_flow_every_interval(hub: tuple[HubStub, int], tmp_path: Path) -> None:
    servicer, port = hub
    async with running(make_agent(tmp_path, port)):
        await servicer.wait_for(lambda h: len(h.of("heartbeat")) >= 3, timeout=2)
    assert all(b.sent_unix_ms > 0 for b in servicer.of("heartbeat"))


async def test_reconnects_after_hub_restart_and_resends_everything(tmp_path: Path) -> None:
    first = HubStub()
    server, port = await start_server(first)
    agent = make_agent(tmp_path, port)
    async with running(agent):
        await first.wait_for(lambda h: "inventory" in h.kinds())
        await first.commands.put(place("job-1"))
        await first.wait_for(lambda h: has_phase(h, "job-1", pb.TASK_PHASE_RUNNING))
        await server.stop(0)
        await asyncio.sleep(0.2)  # the agent retries against a closed port meanwhile
        second = HubStub()
        second.token_used = True  # a new registration would be refused
        server, _ = await start_server(second, port)
        try:
            await second.wait_for(lambda h: "inventory" in h.kinds())
        finally:
            await server.stop(0)
    assert second.kinds()[:3] == ["connect", "hello", "inventory"]
    inventory = second.of("inventory")[0]
    assert inventory.seq > 1
    assert [(t.task_id, t.phase) for t in inventory.tasks] == [("job-1", pb.TASK_PHASE_RUNNING)]
    assert agent.sessions == 2


async def test_registration_waits_for_a_hub_that_is_not_up_yet(tmp_path: Path) -> None:
    probe, port = await start_server(HubStub())
    await probe.stop(0)  # a port nobody listens on, for now
    agent = make_agent(tmp_path, port)
    async with running(agent):
        await asyncio.sleep(0.2)
        servicer = HubStub()
        server, _ = await start_server(servicer, port)
        try:
            await servicer.wait_for(lambda h: "inventory" in h.kinds())
        finally:
            await server.stop(0)
    assert servicer.kinds()[0] == "register"


async def test_revoked_credential_stops_the_agent(hub: tuple[HubStub, int], tmp_path: Path) -> None:
    servicer, port = hub
    servicer.revoked = True
    agent = make_agent(tmp_path, port)
    with pytest.raises(Unauthenticated, match="refused the credential of cluster 'east'"):
        await asyncio.wait_for(agent.run(), timeout=5)


@pytest.mark.parametrize(
    ("token", "used", "error", "wanted"),
    [
        ("wrong", False, Unauthenticated, "invalid or expired join token"),
        ("join-token", True, Conflict, "join token already used"),
    ],
    ids=["bad-token", "token-used-twice"],
)
async def test_refused_registration_fails_fast(
    hub: tuple[HubStub, int], tmp_path: Path, token: str, used: bool,
    error: type[Exception], wanted: str,
) -> None:
    servicer, port = hub
    servicer.token_used = used
    agent = make_agent(tmp_path, port, token=token)
    with pytest.raises(error, match=wanted):
        await asyncio.wait_for(agent.run(), timeout=5)
    assert servicer.kinds() == ["register"]  # asked once, never looped
    assert not agent.store.path.exists()


async def test_cli_exits_non_zero_when_the_token_was_already_used(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    servicer.token_used = True
    fleet = Path(__file__).resolve().parents[2] / "examples" / "fleets" / "edge-mixed.yaml"
    token = tmp_path / "token"
    token.write_text("join-token")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from member_agent.launch import main; main()",
        "--hub", f"127.0.0.1:{port}", "--cluster", "east", "--token-file", str(token),
        "--backend", "sim", "--fleet", str(fleet), "--member-orphan-timeout", "3",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=20)
    assert proc.returncode == 1
    assert "join token already used" in err.decode()


async def test_cli_exits_2_on_a_bad_fleet_file(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text("nodePools:\n- {name: a, allocatable: {cpu: 1, memory: 1Gi}}\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from member_agent.launch import main; main()",
        "--hub", "127.0.0.1:1", "--cluster", "east", "--backend", "sim", "--fleet", str(bad),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=20)
    assert proc.returncode == 2
    assert f"{bad}: nodePools[0].count: required" in err.decode()


async def test_cli_stops_cleanly_on_sigterm(hub: tuple[HubStub, int], tmp_path: Path) -> None:
    servicer, port = hub
    fleet = Path(__file__).resolve().parents[2] / "examples" / "fleets" / "gpu-east.yaml"
    token = tmp_path / "token"
    token.write_text("join-token")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from member_agent.launch import main; main()",
        "--hub", f"127.0.0.1:{port}", "--cluster", "east", "--token-file", str(token),
        "--backend", "sim", "--fleet", str(fleet), "--member-orphan-timeout", "3",
        "--heartbeat-interval", "0.1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        await servicer.wait_for(lambda h: "inventory" in h.kinds(), timeout=20)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=20)
    assert proc.returncode == 0, err.decode()
    inventory = servicer.of("inventory")[0]
    assert len(inventory.nodes) == 21
    assert (token.parent / "token.d" / "credential.json").exists()  # default state dir


class BrokenBackend(SimBackend):
    """A member whose API refuses to create workloads (e.g. a quota or an admission hook)."""

    async def place(self, place: pb.PlaceTask) -> None:
        raise RuntimeError("admission webhook denied the request")


async def test_a_workload_the_member_cannot_create_is_reported_failed(
    hub: tuple[HubStub, int], tmp_path: Path
) -> None:
    servicer, port = hub
    agent = make_agent(tmp_path, port)
    agent.backend = BrokenBackend(FLEET, time_scale=0.01)
    async with running(agent):
        await servicer.wait_for(lambda h: "inventory" in h.kinds())
        await servicer.commands.put(place("job-x"))
        await servicer.wait_for(lambda h: has_phase(h, "job-x", pb.TASK_PHASE_FAILED))
    failed = next(r for r in servicer.of("task") if r.phase == pb.TASK_PHASE_FAILED)
    assert "admission webhook denied" in failed.reason


class _Call:
    """Records what the agent's writer writes; the first write ends the pump."""

    def __init__(self) -> None:
        self.written: list[pb.AgentMessage] = []

    async def write(self, message: pb.AgentMessage) -> None:
        self.written.append(message)
        raise asyncio.CancelledError    # one batch is enough


async def test_a_due_heartbeat_goes_ahead_of_a_backlog_of_reports(tmp_path: Path) -> None:
    # Behind 10,000 queued task reports a heartbeat came back too late for the member's
    # lease; now the writer's next batch starts with it.
    from member_agent.backends.base import Phase, TaskChanged, TaskStatus
    agent = make_agent(tmp_path, 1)
    agent._batch = True
    for i in range(2000):
        agent._outbox.put_nowait(TaskChanged(TaskStatus(f"t{i}", 1, Phase.RUNNING)))
    agent._beat_due = True
    call = _Call()
    with pytest.raises(asyncio.CancelledError):
        await agent._pump(call)
    batch = call.written[0].batch.messages
    assert batch[0].WhichOneof("msg") == "heartbeat"
    assert [m.WhichOneof("msg") for m in batch[1:]] == ["task"] * (len(batch) - 1)
    assert not agent._beat_due
