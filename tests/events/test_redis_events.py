"""Events on a real Redis: published to the stream, read from it, and Redis going down and
coming back while the hub keeps placing (degraded, not failed; caught up afterwards)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from hub.api import create_health_app
from tests.hub.conftest import HubHarness, start_harness, stop_harness
from tests.support.redis import RedisServer, stream_events


@pytest.fixture
async def hub(tmp_path: Path, redis_server: RedisServer) -> AsyncIterator[HubHarness]:
    h = await start_harness(tmp_path / "hub", redis_url=redis_server.url)
    try:
        yield h
    finally:
        await stop_harness(h)


async def until(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_events_go_to_the_stream_and_watchers_read_them_there(
        hub: HubHarness, redis_server: RedisServer) -> None:
    start = (await hub.api.get("/api/v1/events", params={"timeout": 0})).json()
    assert start["source"] == "redis"
    await hub.api.post("/api/v1/tasks", json={"name": "t1", "gpu": 1})
    page = (await hub.api.get("/api/v1/events", params={
        "since": start["next"], "timeout": 10, "name": "t1"})).json()
    assert [e["kind"] for e in page["events"]][:1] == ["Submitted"]
    assert "-" in page["events"][0]["id"]                 # a Redis stream id
    await until(lambda: ("t1", "Submitted") in stream_events(redis_server))


async def test_redis_down_the_hub_keeps_placing_says_degraded_and_catches_up(
        hub: HubHarness, redis_server: RedisServer) -> None:
    health = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_health_app(hub.hub)),
                               base_url="http://health")
    try:
        await hub.api.post("/api/v1/tasks", json={"name": "before", "gpu": 1})
        await until(lambda: hub.hub.events.redis is not None and hub.hub.events.redis.up)
        redis_server.stop()
        names = [f"during-{i}" for i in range(5)]
        for name in names:
            answer = await hub.api.post("/api/v1/tasks", json={"name": name, "gpu": 1})
            assert answer.status_code == 201          # placement and the API go on
        await until(lambda: not hub.hub.events.redis.up)  # type: ignore[union-attr]
        ready = await health.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["degraded"] is True and ready.json()["redis"] == "down"
        metrics = (await health.get("/metrics")).text
        assert "fuyao_redis_up 0.0" in metrics
        watch = await hub.api.get("/api/v1/events", params={"timeout": 0})
        assert watch.status_code == 503 and "Redis" in watch.json()["error"]["message"]
        redis_server.start()                         # back (empty: no persistence)
        await until(lambda: hub.hub.events.redis.status()["pending"] == 0,  # type: ignore[union-attr]
                    timeout=30)
        caught = stream_events(redis_server)
        assert all((name, "Submitted") in caught for name in names)
        ready = (await health.get("/readyz")).json()
        assert ready["redis"] == "ok" and "degraded" not in ready
    finally:
        await health.aclose()


async def test_a_replica_drops_its_read_cache_when_the_stream_grows(hub: HubHarness) -> None:
    reads = hub.hub.ha.reads
    await until(lambda: hub.hub.events.redis is not None and hub.hub.events.redis.up)
    await asyncio.sleep(0.5)                          # the follower is reading from "$"
    reads.ttl = 3600
    await reads.refresh()
    assert not reads.stale()
    await hub.api.post("/api/v1/tasks", json={"name": "x", "gpu": 1})
    await until(reads.stale)
