"""A real in-process hub whose placement cycles the test runs by hand, on a fleet the test
builds directly in the hub's fleet view (no agent: cycles see exactly what the test set)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fuyao.spec import ClusterState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.activetask import ActiveTask
from tests.hub.agentkit import gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness


@contextlib.asynccontextmanager
async def quiet_harness(home: Path) -> AsyncIterator[HubHarness]:
    """A started hub in ``home`` with its background loops stopped (for property tests,
    which cannot take a function-scoped fixture)."""
    h = await start_harness(home)
    for loop in h.hub._loops:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    try:
        yield h
    finally:
        await stop_harness(h)


@pytest.fixture
async def quiet(tmp_path: Path) -> AsyncIterator[HubHarness]:
    """A started hub with its background loops stopped."""
    async with quiet_harness(tmp_path / "hub") as h:
        yield h


def add_cluster(h: HubHarness, name: str, nodes: int, gpus: int,
                product: str = "NVIDIA-A100-SXM4-80GB") -> None:
    """A Ready cluster without headroom, of ``nodes`` nodes with ``gpus`` GPUs each."""
    h.hub.fleet.upsert_cluster(name, labels={}, weight=1, headroom=0.0,
                               state=ClusterState.READY)
    h.hub.fleet.replace_nodes(name, [gpu_node(f"{name}-{i}", product, gpus)
                                     for i in range(nodes)])


async def submit(h: HubHarness, *specs: dict[str, Any]) -> None:
    r = await h.api.post("/api/v1/tasks:batch", json={"tasks": list(specs)})
    assert r.status_code == 201, r.text


async def queue(h: HubHarness, name: str, **fields: Any) -> None:
    r = await h.api.post("/api/v1/queues", json={"name": name, **fields})
    assert r.status_code == 201, r.text


def task(h: HubHarness, name: str) -> ActiveTask:
    found = h.hub.tasks.by_name(name)
    assert found is not None, name
    return found


def placed(h: HubHarness) -> dict[str, str | None]:
    return {t.name: t.cluster for t in h.hub.tasks.active.values() if t.cluster}


async def finish(h: HubHarness, name: str) -> None:
    """The member reports the task Succeeded."""
    t = task(h, name)
    assert t.cluster is not None
    await h.hub.tasks.report(t.cluster, pb.TaskReport(
        task_id=t.id, generation=t.generation, phase=pb.TASK_PHASE_SUCCEEDED))
