"""The hub's side of the agent protocol over real gRPC on loopback.

Join tokens work once, credentials name the cluster, placements carry generations, stale
copies are cancelled, sequence gaps trigger a resync, and a lost cluster's tasks fail over.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from hub.pki import ensure_pki
from tests.hub.agentkit import RawAgent, enroll, gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness


async def join(h: HubHarness, name: str, **extra: Any) -> str:
    r = await h.api.post("/api/v1/clusters", json={"name": name, **extra})
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


def inventoried(h: HubHarness, name: str, nodes: int) -> bool:
    """The cluster is Ready (its Hello arrived) and its Inventory is applied: Ready alone
    comes a message before the nodes do."""
    info = h.hub.fleet.cluster(name)
    return (h.hub.clusters.entries[name].record.state == "Ready" and info is not None
            and info.node_count >= nodes)


async def ready_agent(h: HubHarness, name: str, nodes: list[Any], **extra: Any) -> RawAgent:
    agent = RawAgent(h.agent_address, name)
    await agent.register(await join(h, name, **extra))
    await agent.connect(nodes)
    await until(h, lambda: inventoried(h, name, len(nodes)))
    return agent


async def until(h: HubHarness, cond: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def task(h: HubHarness, name: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.api.get(f"/api/v1/tasks/{name}")).json()
    return body


async def test_join_token_works_once(harness: HubHarness) -> None:
    token = await join(harness, "east")
    agent = RawAgent(harness.agent_address, "east")
    with pytest.raises(grpc.aio.AioRpcError) as wrong:
        await agent.register("fyj_not-the-token")
    assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (await agent.register(token)).startswith("fyc_")
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await agent.register(token)
    assert reused.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "already used" in (reused.value.details() or "")
    other = RawAgent(harness.agent_address, "west")
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await other.register(token)
    assert foreign.value.code() == grpc.StatusCode.UNAUTHENTICATED
    await agent.close()
    await other.close()


async def test_stream_without_valid_credential_is_refused(harness: HubHarness) -> None:
    await join(harness, "east")
    agent = RawAgent(harness.agent_address, "east")
    await agent.connect([gpu_node("n0", "Tesla-T4", 4)], credential="fyc_forged")
    code = await agent.status()
    assert agent.call is not None
    assert code == grpc.StatusCode.UNAUTHENTICATED, await agent.call.details()
    assert harness.hub.clusters.entries["east"].record.state == "Joining"
    await agent.close()


async def test_place_bind_run_succeed(harness: HubHarness) -> None:
    node = gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB", 8)
    agent = await ready_agent(harness, "east", [node])
    cluster = (await harness.api.get("/api/v1/clusters/east")).json()
    assert cluster["state"] == "Ready" and cluster["gpus"] == {"A100": 8}
    await harness.api.post("/api/v1/tasks", json={"name": "ft", "gpu": 2, "gpu_model": "A100"})
    place = (await agent.expect("place")).place
    assert place.generation == 1 and place.workload.gpu_milli == 2000
    assert "A100" in place.workload.selector
    assert (await task(harness, "ft"))["state"] == "Placed"
    agent.report(place.task_id, 1, pb.TASK_PHASE_ACCEPTED)
    agent.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a100-0")
    await until(harness, lambda: harness.hub.tasks.by_name("ft").state.value == "Running")
    agent.report(place.task_id, 1, pb.TASK_PHASE_SUCCEEDED)
    await until(harness, lambda: harness.hub.tasks.by_name("ft") is None)
    view = await task(harness, "ft")
    assert (view["state"], view["cluster"], view["node"]) == ("Succeeded", "east", "a100-0")
    assert [e["kind"] for e in view["events"]] == [
        "Submitted", "Placed", "Accepted", "Running", "Succeeded"]
    await agent.close()


async def test_report_for_stale_generation_gets_cancel(harness: HubHarness) -> None:
    agent = await ready_agent(harness, "east", [gpu_node("t4-0", "Tesla-T4", 4)])
    agent.report("no-such-task", 3, pb.TASK_PHASE_RUNNING, node="t4-0")
    cancel = (await agent.expect("cancel")).cancel
    assert (cancel.task_id, cancel.generation) == ("no-such-task", 3)
    await agent.close()


async def test_sequence_gap_asks_for_resync(harness: HubHarness) -> None:
    node = gpu_node("t4-0", "Tesla-T4", 4)
    agent = await ready_agent(harness, "east", [node])
    agent.delta([node], seq=5)          # expected 2
    assert "does not follow" in (await agent.expect("resync")).resync.reason
    await agent.close()


async def test_task_that_fits_nowhere_stays_queued_with_reason_per_cluster(
        harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("t4-0", "Tesla-T4", 4)])
    west = await ready_agent(harness, "west", [gpu_node("v100-0", "Tesla-V100-SXM2-32GB", 8)])
    await harness.api.post("/api/v1/tasks", json={"name": "big", "gpu": 8, "gpu_model": "H100"})
    await until(harness, lambda: len(harness.hub.tasks.by_name("big").reasons) == 2)
    view = await task(harness, "big")
    assert view["state"] == "Queued"
    assert set(view["reasons"]) == {"east", "west"}
    assert view["message"].startswith("0/2 clusters are available")
    await east.close()
    await west.close()


async def test_lost_cluster_fails_over_and_returning_copy_is_cancelled(
        harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8)],
                             weight=10)
    west = await ready_agent(harness, "west", [gpu_node("b-0", "NVIDIA-A100-PCIE-40GB", 8)],
                             weight=1)
    await harness.api.post("/api/v1/tasks", json={"name": "job", "gpu": 1})
    place = (await east.expect("place")).place
    east.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(harness, lambda: harness.hub.tasks.by_name("job").state.value == "Running")
    await east.close()                  # the cluster goes silent
    moved = (await west.expect("place", timeout=10)).place
    assert (moved.task_id, moved.generation) == (place.task_id, 2)
    view = await task(harness, "job")
    assert view["cluster"] == "west"
    assert "Requeued" in [e["kind"] for e in view["events"]]
    [failover] = harness.hub.store.audit_log(action="cluster.failover")
    assert (failover["actor"], failover["target"]) == ("system", "east")
    # east comes back and still runs generation 1: the hub cancels that copy.
    back = RawAgent(harness.agent_address, "east")
    back.credential = east.credential
    await back.connect([gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8)],
                       tasks=[pb.TaskReport(task_id=place.task_id, generation=1,
                                            phase=pb.TASK_PHASE_RUNNING, node="a-0")])
    cancel = (await back.expect("cancel")).cancel
    assert (cancel.task_id, cancel.generation) == (place.task_id, 1)
    await back.close()
    await west.close()


async def test_removed_cluster_requeues_its_tasks(harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("t4-0", "Tesla-T4", 4)])
    await harness.api.post("/api/v1/tasks", json={"name": "inf", "gpu": 1})
    await east.expect("place")
    r = await harness.api.delete("/api/v1/clusters/east")
    assert r.json() == {"removed": "east", "requeued": 1}
    assert (await task(harness, "inf"))["state"] == "Queued"
    assert await east.status() == grpc.StatusCode.UNAUTHENTICATED
    await east.close()


async def test_tls_channel_verifies_the_hub_with_the_ca_from_the_join(tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", tls=True)
    try:
        r = await h.api.post("/api/v1/clusters", json={"name": "east"})
        joined = r.json()
        assert "--ca-cert east-ca.crt" in joined["agent_command"]
        assert f"--register {h.register_address}" in joined["agent_command"]
        plaintext = RawAgent(h.register_address, "east")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await plaintext.register(joined["token"])
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        await plaintext.close()
        stranger_ca = ensure_pki(tmp_path / "other", ["127.0.0.1"]).ca_cert
        with pytest.raises(grpc.aio.AioRpcError):
            await enroll(h.register_address, stranger_ca, "east", joined["token"])
        ca = joined["ca_cert"].encode()
        client = await enroll(h.register_address, ca, "east", joined["token"])
        agent = RawAgent(h.agent_address, "east", ca_cert=ca, client=client)
        await agent.connect([gpu_node("t4-0", "Tesla-T4", 4)])
        await until(h, lambda: h.hub.clusters.entries["east"].record.state == "Ready")
        await agent.close()
    finally:
        await stop_harness(h)


async def test_task_a_member_cannot_schedule_spills_over_to_another_cluster(
        harness: HubHarness) -> None:
    east = await ready_agent(harness, "east", [gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8)],
                             weight=10)
    west = await ready_agent(harness, "west", [gpu_node("b-0", "NVIDIA-A100-PCIE-40GB", 8)],
                             weight=1)
    await harness.api.post("/api/v1/tasks", json={"name": "stuck", "gpu": 1})
    place = (await east.expect("place")).place
    east.report(place.task_id, 1, pb.TASK_PHASE_UNSCHEDULABLE, reason="node a-0 is draining")
    # Past unschedulable_timeout (1 s here) the hub cancels east's copy and tries west.
    cancel = (await east.expect("cancel", timeout=10)).cancel
    assert (cancel.task_id, cancel.generation) == (place.task_id, 1)
    moved = (await west.expect("place", timeout=10)).place
    assert (moved.task_id, moved.generation) == (place.task_id, 2)
    view = await task(harness, "stuck")
    assert view["cluster"] == "west"
    messages = [e["message"] for e in view["events"]]
    assert any("node a-0 is draining" in m for m in messages)
    assert any("trying another cluster" in m for m in messages)
    await east.close()
    await west.close()


async def test_place_pins_the_model_the_hub_reserved(harness: HubHarness) -> None:
    """A GPU task that names no model is sent with the model of the hub's fit, so the member
    binds what the hub reserved and checked headroom on; CPU-only tasks are sent as given."""
    agent = await ready_agent(harness, "east", [gpu_node("t4-0", "Tesla-T4", 4)])
    await harness.api.post("/api/v1/tasks", json={"name": "any-gpu", "gpu": 1})
    assert (await agent.expect("place")).place.workload.selector == "fuyao.io/gpu-model = T4"
    await harness.api.post("/api/v1/tasks", json={"name": "arm", "selector": "arch = amd64"})
    sent = (await agent.expect("place")).place.workload.selector
    assert sent == "arch = amd64"
    await agent.close()
