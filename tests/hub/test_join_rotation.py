"""Join tokens of an existing cluster: a new one re-registers the agent (replacing a lost
credential) without touching the cluster's tasks; tokens list without secrets, revoke, and
work once."""

from __future__ import annotations

import hashlib

import grpc
import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness
from tests.hub.test_agent_channel import ready_agent, task, until

A100 = "NVIDIA-A100-PCIE-40GB"


async def test_new_join_token_replaces_the_agent_credential_and_keeps_the_tasks(
        harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("a-0", A100, 8)])
    await harness.api.post("/api/v1/tasks", json={"name": "job", "gpu": 1})
    place = (await east.expect("place")).place
    east.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(harness, lambda: harness.hub.tasks.by_name("job").state.value == "Running")
    old_credential = east.credential

    r = await harness.api.post("/api/v1/clusters/east/tokens", json={"ttl_seconds": 600})
    assert r.status_code == 201
    rotated = r.json()
    assert rotated["cluster"] == "east" and "--cluster east" in rotated["agent_command"]
    again = RawAgent(harness.agent_address, "east")
    await again.register(rotated["token"])     # the agent lost its credential: re-register
    await again.connect([gpu_node("a-0", A100, 8)],
                        tasks=[pb.TaskReport(task_id=place.task_id, generation=1,
                                             phase=pb.TASK_PHASE_RUNNING, node="a-0")])
    await until(harness, lambda: harness.hub.clusters.entries["east"].connected)
    view = await task(harness, "job")
    assert (view["state"], view["cluster"], view["generation"]) == ("Running", "east", 1)
    assert "Requeued" not in [e["kind"] for e in view["events"]]
    sent = [m.WhichOneof("msg") for m in list(again.inbox._queue)]
    assert "place" not in sent and "cancel" not in sent     # acks aside: nothing sent

    stale = RawAgent(harness.agent_address, "east")
    await stale.connect([], credential=old_credential)
    assert await stale.status() == grpc.StatusCode.UNAUTHENTICATED
    for agent in (east, again, stale):
        await agent.close()


async def test_join_tokens_list_without_secrets_revoke_and_work_once(
        harness: HubHarness) -> None:
    r = await harness.api.post("/api/v1/clusters", json={"name": "east"})
    first = r.json()["token"]
    second = (await harness.api.post("/api/v1/clusters/east/tokens")).json()["token"]
    listed = (await harness.api.get("/api/v1/clusters/east/tokens")).json()
    assert first not in str(listed) and second not in str(listed)
    assert [t["state"] for t in listed] == ["Unused", "Unused"]
    second_id = hashlib.sha256(second.encode()).hexdigest()[:12]
    assert second_id in [t["id"] for t in listed]
    r = await harness.api.delete(f"/api/v1/clusters/east/tokens/{second_id}")
    assert r.json() == {"revoked": second_id, "cluster": "east"}
    assert (await harness.api.delete(f"/api/v1/clusters/east/tokens/{second_id}")
            ).status_code == 404

    agent = RawAgent(harness.agent_address, "east")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await agent.register(second)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    await agent.register(first)
    with pytest.raises(grpc.aio.AioRpcError) as replayed:
        await agent.register(first)
    assert replayed.value.code() == grpc.StatusCode.ALREADY_EXISTS
    states = [t["state"] for t in (await harness.api.get("/api/v1/clusters/east/tokens")).json()]
    assert states == ["Used"]
    assert (await harness.api.post("/api/v1/clusters/west/tokens")).status_code == 404
    audit = harness.hub.store.audit_log(limit=10, action="agent.register")
    assert [(a["actor"], a["action"], a["result"][:7]) for a in audit] == [
        ("agent", "agent.register", "refused"), ("agent:east", "agent.register", "ok"),
        ("agent", "agent.register", "refused")]
    assert audit[0]["source"].startswith(("ipv4:127.0.0.1", "ipv6:"))
    await agent.close()
