"""No message the hub writes on an agent stream exceeds ``agent_message_limit``: batches are
split under it, and a task whose PlaceTask alone is larger fails with the reason in its
timeline (once, never re-sent) while the stream and the other tasks go on. Real gRPC on
loopback, the limit lowered through the hub's configuration."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuyao.wire.v1 import agent_pb2 as pb
from hub.config import HubConfig, check_config
from hub.sessions import pack
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness
from tests.hub.test_agent_channel import inventoried, join, task, until

LIMIT = 8192
A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
async def small(tmp_path: Path) -> AsyncIterator[HubHarness]:
    h = await start_harness(tmp_path / "hub", agent_message_limit=LIMIT)
    try:
        yield h
    finally:
        await stop_harness(h)


async def agent(h: HubHarness, features: tuple[str, ...]) -> RawAgent:
    a = RawAgent(h.agent_address, "east")
    await a.register(await join(h, "east"))
    await a.connect([gpu_node("n0", A100, 8, cpu=256)], features=features)
    await until(h, lambda: inventoried(h, "east", 1))
    return a


def spec(name: str, command_bytes: int) -> dict[str, Any]:
    return {"name": name, "cpu": "100m", "command": ["sh", "-c", "x" * command_bytes]}


async def written(a: RawAgent, places: int, timeout: float = 10.0) -> list[pb.HubMessage]:
    """Messages as written (acks too) until ``places`` PlaceTasks arrived."""
    out: list[pb.HubMessage] = []
    seen = 0
    while seen < places:
        msg = await asyncio.wait_for(a.inbox.get(), timeout)
        inner = list(msg.batch.messages) if msg.WhichOneof("msg") == "batch" else [msg]
        seen += sum(m.WhichOneof("msg") == "place" for m in inner)
        out.append(msg)
    return out


def places(messages: list[pb.HubMessage]) -> list[str]:
    names = []
    for msg in messages:
        inner = list(msg.batch.messages) if msg.WhichOneof("msg") == "batch" else [msg]
        names += [m.place.name for m in inner if m.WhichOneof("msg") == "place"]
    return names


async def test_a_task_too_large_to_send_fails_with_the_reason_and_the_stream_lives(
        small: HubHarness) -> None:
    east = await agent(small, ())
    r = await small.api.post("/api/v1/tasks:batch",
                             json={"tasks": [spec("huge", 20_000), spec("fine", 100)]})
    assert r.status_code == 201, r.text
    assert places(await written(east, 1)) == ["fine"]
    await until(small, lambda: small.hub.tasks.by_name("huge") is None)
    huge = await task(small, "huge")
    assert huge["state"] == "Failed"
    failed = [e for e in huge["events"] if e["kind"] == "Failed"]
    assert len(failed) == 1 and "over the 8192-byte limit" in failed[0]["message"]
    assert "bytes encoded" in huge["message"]
    # The stream is the same one and still carries commands; nothing more for "huge".
    r = await small.api.post("/api/v1/tasks", json=spec("after", 100))
    assert r.status_code == 201
    assert places(await written(east, 1)) == ["after"]
    assert small.hub.clusters.entries["east"].record.state == "Ready"
    assert small.hub.metrics.unsendable_tasks._value.get() == 1
    await east.close()


async def test_batches_are_split_under_the_limit_and_an_oversized_task_is_left_out(
        small: HubHarness) -> None:
    east = await agent(small, ("batch",))
    tasks = [spec(f"t{i}", 2500) for i in range(8)] + [spec("huge", 9000)]
    r = await small.api.post("/api/v1/tasks:batch", json={"tasks": tasks})
    assert r.status_code == 201, r.text
    out = await written(east, 8)
    assert sorted(places(out)) == [f"t{i}" for i in range(8)]
    assert all(m.ByteSize() <= LIMIT for m in out)
    assert any(m.WhichOneof("msg") == "batch" for m in out)   # still batched, only split
    await until(small, lambda: small.hub.tasks.by_name("huge") is None)
    assert (await task(small, "huge"))["state"] == "Failed"
    await east.close()


def test_the_limit_is_configurable_within_bounds(tmp_path: Path) -> None:
    check_config(HubConfig(home=tmp_path, agent_message_limit=1 << 20))
    for bad in (100, 64 * 1024 * 1024):
        with pytest.raises(Exception, match="agent_message_limit must be between"):
            check_config(HubConfig(home=tmp_path, agent_message_limit=bad))


def _place(i: int, size: int) -> pb.HubMessage:
    return pb.HubMessage(place=pb.PlaceTask(task_id=f"id{i}", generation=1, name=f"t{i}",
                                            workload=pb.TaskWorkload(image="x" * size)))


@given(sizes=st.lists(st.integers(0, 3000), max_size=40), limit=st.integers(1024, 4096),
       batches=st.booleans())
def test_pack_keeps_every_message_within_the_limit_and_in_order(
        sizes: list[int], limit: int, batches: bool) -> None:
    messages = [_place(i, s) for i, s in enumerate(sizes)]
    packed = pack(messages, batches, limit)
    assert all(m.ByteSize() <= limit for m in packed.messages)
    fitting = [m for m in messages if m.ByteSize() <= limit]
    assert places(packed.messages) == [m.place.name for m in fitting]
    assert packed.sent == fitting
    assert [p.name for p, _ in packed.oversized] == [
        m.place.name for m in messages if m.ByteSize() > limit]
