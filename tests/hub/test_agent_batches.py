"""Batched messages on the agent stream (AgentBatch / HubBatch), over real gRPC on loopback.

Each side packs messages only for a peer that said it reads them: the hub announces the
"batch" feature in its initial metadata, the agent in its Hello. A batch is applied in order
exactly as if its messages had come one by one; a nested batch ends the stream.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from hub import loops
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness
from tests.hub.test_agent_channel import inventoried, join, task, until


async def batch_agent(h: HubHarness, name: str, features: tuple[str, ...]) -> RawAgent:
    agent = RawAgent(h.agent_address, name)
    await agent.register(await join(h, name))
    await agent.connect([gpu_node("n0", "NVIDIA-A100-SXM4-80GB", 8)], features=features)
    await until(h, lambda: inventoried(h, name, 1))
    return agent


async def commands(agent: RawAgent, places: int) -> list[pb.HubMessage]:
    """Hub messages as written on the stream (acks left out) until ``places`` PlaceTasks."""
    out: list[pb.HubMessage] = []
    seen = 0
    while seen < places:
        msg = await asyncio.wait_for(agent.inbox.get(), 10)
        inner = list(msg.batch.messages) if msg.WhichOneof("msg") == "batch" else [msg]
        seen += sum(m.WhichOneof("msg") == "place" for m in inner)
        if any(m.WhichOneof("msg") != "ack" for m in inner):
            out.append(msg)
    return out


async def submit(h: HubHarness, count: int) -> None:
    r = await h.api.post("/api/v1/tasks:batch",
                         json={"tasks": [{"name": f"t{i}", "gpu": 1} for i in range(count)]})
    assert r.status_code == 201, r.text


async def test_the_hub_announces_batches_in_its_initial_metadata(harness: HubHarness) -> None:
    agent = await batch_agent(harness, "east", ())
    assert agent.call is not None
    metadata: Any = await agent.call.initial_metadata()
    assert ("fuyao-features", "batch,device-columns,label-sets") in list(metadata)
    await agent.close()


async def test_an_agent_that_reads_batches_gets_one_cycles_placements_in_one(
        harness: HubHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle's placements are sent slice by slice (``hub.loops.SLICE_SECONDS``); with a
    slice long enough for the whole cycle, they reach a batch-reading agent in one batch."""
    monkeypatch.setattr(loops, "SLICE_SECONDS", 60.0)
    agent = await batch_agent(harness, "east", ("batch",))
    await submit(harness, 3)
    written = await commands(agent, 3)
    assert len(written) == 1 and written[0].WhichOneof("msg") == "batch"
    places = [m.place for m in written[0].batch.messages if m.WhichOneof("msg") == "place"]
    assert sorted(p.name for p in places) == ["t0", "t1", "t2"]
    await agent.close()


async def test_an_agent_that_did_not_say_batch_gets_one_message_at_a_time(
        harness: HubHarness) -> None:
    agent = await batch_agent(harness, "east", ())
    await submit(harness, 3)
    written = await commands(agent, 3)
    assert [m.WhichOneof("msg") for m in written] == ["place"] * 3
    await agent.close()


async def test_a_batch_of_reports_is_applied_in_order(harness: HubHarness) -> None:
    agent = await batch_agent(harness, "east", ("batch",))
    await submit(harness, 1)
    place = (await commands(agent, 1))[0]
    msg = place.batch.messages[0] if place.WhichOneof("msg") == "batch" else place
    task_id = msg.place.task_id
    agent.send(pb.AgentMessage(batch=pb.AgentBatch(messages=[
        pb.AgentMessage(task=pb.TaskReport(task_id=task_id, generation=1, phase=phase,
                                           node="n0"))
        for phase in (pb.TASK_PHASE_ACCEPTED, pb.TASK_PHASE_RUNNING,
                      pb.TASK_PHASE_SUCCEEDED)])))
    await until(harness, lambda: harness.hub.tasks.by_name("t0") is None)
    await until(harness, lambda: harness.hub.writer.commits > 0)
    view = await task(harness, "t0")
    assert view["state"] == "Succeeded"
    assert [e["kind"] for e in view["events"]] == [
        "Submitted", "Placed", "Accepted", "Running", "Succeeded"]
    await agent.close()


async def test_a_nested_batch_ends_the_stream_with_the_reason(harness: HubHarness) -> None:
    agent = await batch_agent(harness, "east", ("batch",))
    inner = pb.AgentMessage(batch=pb.AgentBatch(messages=[
        pb.AgentMessage(heartbeat=pb.Heartbeat())]))
    agent.send(pb.AgentMessage(batch=pb.AgentBatch(messages=[inner])))
    code = await asyncio.wait_for(agent.status(), 10)
    assert agent.call is not None
    assert code != grpc.StatusCode.OK
    assert "cannot hold another batch" in (await agent.call.details() or "")
    await agent.close()


async def test_an_ending_in_flight_does_not_hold_the_streams_next_reports(
        harness: HubHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Succeeded report waits for its durable commit before its task is dropped; the
    stream's later reports of other tasks are applied meanwhile (``hub.endings``)."""
    h = harness
    agent = await batch_agent(h, "east", ("batch",))
    await submit(h, 2)
    written = await commands(agent, 2)
    ids = {m.place.name: m.place.task_id
           for w in written for m in (w.batch.messages if w.WhichOneof("msg") == "batch"
                                      else [w]) if m.WhichOneof("msg") == "place"}
    gate = threading.Event()
    apply = h.hub.writer.store.apply

    def held(updates: Any, events: Any, placements: Any) -> Any:
        if any(e.kind == "Succeeded" for e in events):
            gate.wait(10)
        return apply(updates, events, placements)

    monkeypatch.setattr(h.hub.writer.store, "apply", held)

    def report(name: str, phase: int) -> pb.AgentMessage:
        return pb.AgentMessage(task=pb.TaskReport(task_id=ids[name], generation=1,
                                                  phase=phase, node="n0"))

    agent.send(pb.AgentMessage(batch=pb.AgentBatch(messages=[
        report("t0", pb.TASK_PHASE_RUNNING), report("t0", pb.TASK_PHASE_SUCCEEDED)])))
    agent.send(pb.AgentMessage(batch=pb.AgentBatch(messages=[
        report("t1", pb.TASK_PHASE_ACCEPTED), report("t1", pb.TASK_PHASE_RUNNING)])))
    t1 = h.hub.tasks.by_name("t1")
    assert t1 is not None
    await until(h, lambda: t1.state == "Running")
    t0 = h.hub.tasks.by_name("t0")
    assert t0 is not None and t0.state == "Succeeded"   # ended in memory, not yet dropped
    gate.set()
    await until(h, lambda: h.hub.tasks.by_name("t0") is None)
    view = await task(h, "t0")
    assert view["state"] == "Succeeded"
    await agent.close()
