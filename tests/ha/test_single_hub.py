"""On SQLite there is one hub, and it runs the same leadership code path: a local lease."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness


async def test_a_sqlite_hub_leads_at_once_and_reports_itself(harness: HubHarness) -> None:
    answer = await harness.api.get("/api/v1/hub/status")
    assert answer.status_code == 200
    status = answer.json()
    assert status["epoch"] == 1
    assert status["leader"] == "127.0.0.1:8848"
    assert [(r["address"], r["role"], r["epoch"]) for r in status["replicas"]] == [
        ("127.0.0.1:8848", "leader", 1)]
    assert harness.hub.ha.leading and harness.hub.ha.epoch == 1


async def test_every_restart_is_a_new_epoch_and_the_old_epoch_cannot_write(
        tmp_path: Path) -> None:
    first = await start_harness(tmp_path / "hub")
    stale = first.hub.ha.fence()
    await stop_harness(first)
    second = await start_harness(tmp_path / "hub")
    try:
        assert second.hub.ha.epoch == 2
        answer = await second.api.post("/api/v1/tasks", json={"name": "t", "gpu": 1})
        assert answer.status_code == 201, answer.text
        # The first start's fence, replayed against the store the second one writes to.
        store = second.hub.store
        store.fence = stale
        answer = await second.api.post("/api/v1/tasks", json={"name": "u", "gpu": 1})
        assert answer.status_code == 503
        assert "led epoch 1, but epoch 2" in answer.json()["error"]["message"]
    finally:
        second.hub.store.fence = second.hub.ha.fence()
        await stop_harness(second)


async def test_while_a_new_leader_rebuilds_its_view_agents_and_writes_are_told_to_retry(
        harness: HubHarness) -> None:
    """Between winning the lease and rebuilding from the store, an agent is answered
    UNAVAILABLE (retry), not judged against a half-loaded cluster list: found by fault 3,
    where an agent that reached the new leader in that window was told its credential was
    invalid and stopped for good. A write gets 503; a read waits for the rebuild."""
    east = RawAgent(harness.agent_address, "east")
    token = (await harness.api.post("/api/v1/clusters",
                                    json={"name": "east"})).json()["token"]
    await east.register(token)
    harness.hub.ha.rebuilt = False                 # as just after winning the lease
    try:
        await east.connect([gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8)])
        assert await asyncio.wait_for(east.status(), 10) == grpc.StatusCode.UNAVAILABLE
        answer = await harness.api.post("/api/v1/tasks", json={"name": "t", "gpu": 1})
        assert answer.status_code == 503
        assert "taking over" in answer.json()["error"]["message"]
        assert (await harness.api.get("/api/v1/clusters")).status_code == 200
    finally:
        harness.hub.ha.rebuilt = True
    again = RawAgent(harness.agent_address, "east")
    again.credential = east.credential
    await again.connect([gpu_node("a-0", "NVIDIA-A100-PCIE-40GB", 8)])
    await again.expect("ack", timeout=10)            # accepted now: heartbeats answered
    await again.close()
