"""A node's devices as ``DeviceColumns`` on the agent stream, over real gRPC on loopback.

The hub announces ``device-columns`` in its ``fuyao-features`` metadata; an agent that reads
it sends a node's devices of one class in the agents' naming as two packed lists instead of
a message per device. The hub files them as the messages they stand for, in a first
inventory and in deltas, and refuses a node that sends both forms, ending the stream with
the reason. An agent whose hub did not announce the feature keeps the messages.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from fuyao.inventory import DeviceInfo, node_to_proto
from fuyao.wire.v1 import agent_pb2 as pb
from tests.agent.test_connection import make_agent
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness
from tests.hub.test_agent_channel import inventoried, join, until


def infos(h: HubHarness, cluster: str) -> dict[str, object]:
    view = h.hub.fleet.cluster(cluster)
    assert view is not None
    return {n.name: n.info for n in view.nodes()}


async def test_columns_file_as_the_devices_they_stand_for(harness: HubHarness) -> None:
    nodes = [gpu_node("n0", "NVIDIA-A100-SXM4-80GB", 8), gpu_node("n1", "Tesla-T4", 4),
             gpu_node("cpu0", "", 0)]
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    await agent.connect(nodes, columns=True)
    await until(harness, lambda: inventoried(harness, "east", 3))
    assert infos(harness, "east") == {n.name: n for n in nodes}
    # a delta in columns: two of n0's cards taken
    taken = replace(nodes[0], devices=tuple(
        replace(d, free_milli=0) if i < 2 else d for i, d in enumerate(nodes[0].devices)))
    agent.delta([taken], columns=True)
    await until(harness, lambda: infos(harness, "east")["n0"] == taken)
    assert harness.hub.fleet.cluster("east").totals()["A100"].used_milli == 2000
    await agent.close()


async def test_a_node_with_both_forms_ends_the_stream_with_the_reason(
        harness: HubHarness) -> None:
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    await agent.connect([gpu_node("n0", "Tesla-T4", 1)])
    await until(harness, lambda: inventoried(harness, "east", 1))
    both = pb.Node(name="n1", devices=[pb.Device(id="n1/gpu0", model="T4")],
                   device_columns=pb.DeviceColumns(model="T4", free_milli=[1000],
                                                   free_memory_mib=[0]))
    agent.send(pb.AgentMessage(inventory=pb.Inventory(seq=5, nodes=[both])))
    code = await asyncio.wait_for(agent.status(), 10)
    assert agent.call is not None
    assert code != grpc.StatusCode.OK
    assert "devices and device_columns are both set" in (await agent.call.details() or "")
    assert set(infos(harness, "east")) == {"n0"}   # the refused inventory changed nothing
    await agent.close()


async def test_a_delta_with_a_bad_node_ends_the_stream_and_changes_nothing(
        harness: HubHarness) -> None:
    """Deltas are filed from the wire as inventories are: a node breaking the columns'
    rules is refused before any node of its delta is filed."""
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    node = gpu_node("n0", "Tesla-T4", 2)
    await agent.connect([node])
    await until(harness, lambda: inventoried(harness, "east", 1))
    taken = replace(node, devices=(replace(node.devices[0], free_milli=0), node.devices[1]))
    good = node_to_proto(taken, True)
    bad = pb.Node(name="n9", device_columns=pb.DeviceColumns(
        model="T4", free_milli=[1000], free_memory_mib=[]))
    agent.send(pb.AgentMessage(delta=pb.InventoryDelta(seq=agent.seq + 1,
                                                       upserted=[good, bad])))
    code = await asyncio.wait_for(agent.status(), 10)
    assert agent.call is not None
    assert code != grpc.StatusCode.OK
    assert "lists 1 free shares and 0 free memories" in (await agent.call.details() or "")
    assert infos(harness, "east") == {"n0": node}   # n0's change was not filed either
    await agent.close()


class _Call:
    """Records the agent's first write, then ends it."""

    def __init__(self) -> None:
        self.written: list[pb.AgentMessage] = []

    async def write(self, message: pb.AgentMessage) -> None:
        self.written.append(message)
        raise asyncio.CancelledError


async def first_inventory(tmp_path: Path, **features: bool) -> pb.Inventory:
    """The inventory a simulated agent writes first, with its feature flags set (``_columns``,
    ``_label_sets``: what the hub's metadata announced)."""
    agent = make_agent(tmp_path, 1)
    for flag, announced in features.items():
        setattr(agent, f"_{flag}", announced)
    call = _Call()
    with pytest.raises(asyncio.CancelledError):
        await agent._write_inventory(call)
    return call.written[0].inventory


@pytest.mark.parametrize("announced", [True, False])
async def test_an_agent_sends_columns_only_to_a_hub_that_reads_them(
        tmp_path: Path, announced: bool) -> None:
    nodes = (await first_inventory(tmp_path, columns=announced)).nodes
    gpu = [n for n in nodes if n.devices or n.HasField("device_columns")]
    assert gpu, "the simulated fleet has GPU nodes"
    assert all(n.HasField("device_columns") == announced for n in gpu)
    assert all(bool(n.devices) != announced for n in gpu)


def test_gpu_node_devices_are_in_the_agents_naming() -> None:
    """The columns above stand for these devices (kit check: ids ``<node>/gpu<i>``)."""
    node = gpu_node("n0", "Tesla-T4", 2)
    assert [d.id for d in node.devices] == ["n0/gpu0", "n0/gpu1"]
    assert all(isinstance(d, DeviceInfo) for d in node.devices)


@pytest.mark.parametrize("first", [True, False])
def test_a_refused_inventory_changes_nothing(first: bool) -> None:
    """A first inventory (filed in one pass) and a resync (node by node) alike: a node that
    breaks the columns' rules is refused before any node is filed or dropped."""
    from fuyao.errors import InvalidInput
    from fuyao.inventory import node_to_proto
    from fuyao.spec import ClusterState
    from hub.fleet import FleetView

    fleet = FleetView()
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
    kept = gpu_node("old", "Tesla-T4", 2)
    if not first:
        fleet.replace_nodes("c1", [node_to_proto(kept, True)])
    before = {n.name: n.info for n in fleet.cluster("c1").nodes()}
    bad = pb.Node(name="bad", device_columns=pb.DeviceColumns(
        model="T4", free_milli=[1000], free_memory_mib=[]))
    with pytest.raises(InvalidInput, match="lists 1 free shares and 0 free memories"):
        fleet.replace_nodes("c1", [node_to_proto(gpu_node("new", "Tesla-T4", 1), True), bad])
    assert {n.name: n.info for n in fleet.cluster("c1").nodes()} == before
    # and what it left behind changes no later filing: as a fleet that never saw it
    fresh = FleetView()
    fresh.upsert_cluster("c1", labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
    good = [node_to_proto(gpu_node("new", "Tesla-T4", 1), True)]
    for view in (fleet, fresh):
        view.replace_nodes("c1", good)
    assert fleet.capacity() == fresh.capacity()
    assert ([(n.name, n.info) for n in fleet.cluster("c1").nodes()]
            == [(n.name, n.info) for n in fresh.cluster("c1").nodes()])
    assert [g.key for g in fleet.cluster("c1")._groups.values()] == [
        g.key for g in fresh.cluster("c1")._groups.values()]
