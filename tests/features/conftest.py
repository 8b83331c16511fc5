"""A hub with one raw agent reporting GPU nodes, for the task-feature tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fuyao.inventory import NodeInfo
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness


@dataclass
class Fleet:
    """A running hub and the raw agents of its clusters."""

    h: HubHarness
    agents: dict[str, RawAgent]

    async def join(self, name: str, nodes: list[NodeInfo], **body: Any) -> RawAgent:
        r = await self.h.api.post("/api/v1/clusters", json={"name": name, **body})
        assert r.status_code == 201, r.text
        agent = RawAgent(self.h.agent_address, name)
        await agent.register(r.json()["token"])
        await agent.connect(nodes)
        self.agents[name] = agent
        await until(lambda: self.h.hub.fleet.cluster(name) is not None
                    and self.h.hub.fleet.cluster(name).node_count == len(nodes))  # type: ignore[union-attr]
        return agent

    async def task(self, name: str) -> dict[str, Any]:
        r = await self.h.api.get(f"/api/v1/tasks/{name}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body


async def until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    """Poll until ``condition()`` holds (generous: the machine may be loaded)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    h = await start_harness(tmp_path / "hub")
    f = Fleet(h, {})
    try:
        yield f
    finally:
        for agent in f.agents.values():
            await agent.close()
        await stop_harness(h)


__all__ = ["Fleet", "gpu_node", "until"]
