"""On SQLite there is one hub, and it runs the same leadership code path: a local lease."""

from __future__ import annotations

from pathlib import Path

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
