"""The agent channel refuses what a cluster may not say: a status for another cluster's
task, and a stream without a valid credential. Each is refused, audited with where it came
from, and changes nothing."""

from __future__ import annotations

import asyncio

import grpc

from fuyao.wire.v1 import agent_pb2 as pb
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness
from tests.hub.test_agent_channel import ready_agent, task, until

A100 = "NVIDIA-A100-PCIE-40GB"


async def test_a_status_for_another_clusters_task_is_refused_and_audited(
        harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("a-0", A100, 8)], weight=10)
    west = await ready_agent(harness, "west", [gpu_node("b-0", A100, 8)], weight=1)
    await harness.api.post("/api/v1/tasks", json={"name": "job", "gpu": 1})
    place = (await east.expect("place")).place
    before = await task(harness, "job")
    west.report(place.task_id, place.generation, pb.TASK_PHASE_SUCCEEDED, node="b-0")
    await until(harness, lambda: bool(harness.hub.store.audit_log(action="agent.report")))
    [entry] = harness.hub.store.audit_log(action="agent.report")
    assert (entry["actor"], entry["target"]) == ("agent:west", "job")
    assert entry["result"] == ("refused: cluster west reported a status for task job, which "
                               "is placed on east")
    after = await task(harness, "job")
    assert (after["state"], after["cluster"]) == (before["state"], "east")
    assert [e["kind"] for e in after["events"]] == [e["kind"] for e in before["events"]]
    await asyncio.sleep(0.3)
    sent = [m.WhichOneof("msg") for m in list(west.inbox._queue)]
    assert "place" not in sent and "cancel" not in sent     # acks aside: nothing sent
    await east.close()
    await west.close()


async def test_a_stream_without_a_valid_credential_is_refused_and_audited(
        harness: HubHarness) -> None:
    await harness.api.post("/api/v1/clusters", json={"name": "east"})
    intruder = RawAgent(harness.agent_address, "east")
    await intruder.connect([gpu_node("x-0", A100, 8)], credential="fyc_forged")
    assert await intruder.status() == grpc.StatusCode.UNAUTHENTICATED
    [entry] = harness.hub.store.audit_log(action="agent.connect")
    assert entry["result"].startswith("refused: agent credential is not valid")
    assert entry["source"].startswith(("ipv4:127.0.0.1", "ipv6:"))
    view = (await harness.api.get("/api/v1/clusters/east")).json()
    assert (view["state"], view["nodes"]) == ("Joining", 0)
    await intruder.close()
