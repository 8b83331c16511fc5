"""The sim member in its own process role: lease fencing, the copy log, agents that come
and go while the member keeps its copies."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import Phase
from member_agent.backends.sim.backend import SimBackend
from member_agent.backends.sim.lease import REASON_EXPIRED, Lease
from member_agent.backends.sim.member import CopyLog, SimMember, member_address
from member_agent.backends.sim.remote import MemberBackend
from tests.agent.recorder import Recorder
from tests.agent.test_sim_backend import fleet, place


@pytest.mark.parametrize(("renewals", "at", "valid", "refusal"), [
    ([], 0.0, False, REASON_EXPIRED + ": not starting it"),   # never renewed: fenced
    ([10.0], 5.0, True, ""),
    ([10.0], 10.0, False, REASON_EXPIRED + ": not starting it"),
    ([10.0, 8.0], 9.0, True, ""),            # a late, shorter renewal never shortens it
    ([10.0, 20.0], 15.0, True, ""),
])
def test_lease_table(renewals: list[float], at: float, valid: bool, refusal: str) -> None:
    lease = Lease()
    for until in renewals:
        lease.renew(until)
    assert lease.valid(at) is valid
    assert lease.refusal(at) == refusal


def test_lease_expiry_is_acted_on_once_per_expiry() -> None:
    lease = Lease()
    assert lease.newly_expired(0.0) == ""          # nothing ran before the first renewal
    lease.renew(time.monotonic() + 0.05)
    assert lease.newly_expired() == ""
    time.sleep(0.06)
    assert lease.newly_expired() == REASON_EXPIRED
    assert lease.newly_expired() == ""
    lease.renew(time.monotonic() + 60)
    assert lease.newly_expired() == ""
    lease.until = time.monotonic() - 1
    assert lease.newly_expired() == REASON_EXPIRED


def restartable(task_id: str, failover: str = "") -> pb.PlaceTask:
    command = place(task_id, gpu=0)
    command.workload.failover = failover
    return command


class Member:
    """A ``SimMember`` served in this loop, and an agent-side ``MemberBackend`` on it."""

    def __init__(self, state_dir: Path, log: Path) -> None:
        self.state_dir = state_dir
        self.log = log
        self.sim = SimBackend(fleet(), time_scale=0.01, retry_interval=0.05)
        self.member = SimMember(self.sim, member_address(state_dir),
                                copy_log=CopyLog(log, "east"))
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.member.run(self.stop))
        await asyncio.sleep(0.05)

    async def agent(self) -> tuple[MemberBackend, Recorder]:
        backend = MemberBackend(self.state_dir, member_argv=["never-spawned"])
        recorder = Recorder()
        await backend.start(recorder)
        return backend, recorder

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    async def close(self) -> None:
        self.stop.set()
        assert self.task is not None
        await self.task


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[Member]:
    m = Member(tmp_path / "state", tmp_path / "copies.jsonl")
    await m.start()
    yield m
    await m.close()


async def test_copies_outlive_the_agent_and_a_new_agent_adopts_them(member: Member) -> None:
    agent, rec = await member.agent()
    await agent.renew_lease(time.monotonic(), 30)
    await agent.place(restartable("job"))
    await rec.wait_for("job", Phase.RUNNING)
    await agent.stop()                          # the agent goes away; the member does not
    await asyncio.sleep(0.2)
    again, _ = await member.agent()
    assert [(t.task_id, t.phase) for t in again.tasks()] == [("job", Phase.RUNNING)]
    assert {n.name for n in again.nodes()} == {"t4-0", "cpu-0"}
    assert [(e["task"], e["event"]) for e in member.lines()] == [("job", "start")]
    await again.stop()


async def test_lease_expiry_stops_restartable_copies_and_keeps_never_ones(
        member: Member) -> None:
    agent, rec = await member.agent()
    await agent.renew_lease(time.monotonic(), 0.5)
    await agent.place(restartable("movable"))
    await agent.place(restartable("pinned", failover="never"))
    await rec.wait_for("movable", Phase.RUNNING)
    await rec.wait_for("pinned", Phase.RUNNING)
    await rec.wait_for("movable", Phase.CANCELLED)      # no renewal: fenced by the member
    assert rec.phases("pinned")[-1] is Phase.RUNNING
    stops = [e for e in member.lines() if e["event"] == "stop"]
    assert [(e["task"], e["reason"]) for e in stops] == [
        ("movable", f"cancelled: {REASON_EXPIRED}")]
    assert {k for k in stops[0]} == {"ts", "cluster", "task", "generation", "node", "event",
                                     "reason"}
    # While expired, a restartable copy is refused; a never copy still starts.
    await agent.place(restartable("late"))
    await agent.place(restartable("late-pinned", failover="never"))
    await rec.wait_for("late", Phase.CANCELLED)
    await rec.wait_for("late-pinned", Phase.RUNNING)
    assert Phase.RUNNING not in rec.phases("late")
    # Renewed: restartable copies start again.
    await agent.renew_lease(time.monotonic(), 30)
    await agent.place(restartable("fresh"))
    await rec.wait_for("fresh", Phase.RUNNING)
    await agent.stop()
