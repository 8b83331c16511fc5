"""Labels sent once per distinct set (``label-sets``) on the agent stream, over real gRPC.

The hub announces ``label-sets`` in its ``fuyao-features`` metadata; an agent that reads it
sends each distinct label map once per message and each node the number of its set plus its
own keys (the hostname). The hub files that as the whole maps it stands for, in a first
inventory and in deltas, and refuses a node naming a set that was not sent (or repeating a
key of its set), ending the stream with the reason and changing nothing. An agent whose hub
did not announce the feature sends whole maps.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from fuyao.inventory import NodeInfo
from fuyao.labelsets import encode
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import NodesChanged
from tests.agent.test_connection import make_agent
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness
from tests.hub.test_agent_channel import inventoried, join, until
from tests.hub.test_device_columns import first_inventory, infos


def named(name: str, product: str, gpus: int) -> NodeInfo:
    """``gpu_node`` with its hostname label, as real agents send it."""
    node = gpu_node(name, product, gpus)
    return replace(node, labels={**node.labels, "kubernetes.io/hostname": name})


async def test_label_sets_file_as_the_maps_they_stand_for(harness: HubHarness) -> None:
    nodes = [named("n0", "NVIDIA-A100-SXM4-80GB", 8), named("n1", "NVIDIA-A100-SXM4-80GB", 8),
             named("n2", "Tesla-T4", 4), gpu_node("cpu0", "", 0)]
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    await agent.connect(nodes, columns=True, label_sets=True)
    await until(harness, lambda: inventoried(harness, "east", 4))
    assert infos(harness, "east") == {n.name: n for n in nodes}
    # a delta in the same form: n1 becomes a T4 node
    moved = named("n1", "Tesla-T4", 4)
    agent.delta([moved], columns=True, label_sets=True)
    await until(harness, lambda: infos(harness, "east")["n1"] == moved)
    await agent.close()


@pytest.mark.parametrize("message", ["inventory", "delta"])
async def test_a_node_naming_no_set_ends_the_stream_and_changes_nothing(
        harness: HubHarness, message: str) -> None:
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    node = named("n0", "Tesla-T4", 1)
    await agent.connect([node], label_sets=True)
    await until(harness, lambda: inventoried(harness, "east", 1))
    good, sets = encode([replace(node, unschedulable=True), named("n1", "Tesla-T4", 1)])
    bad = pb.Node(name="n9", label_set=len(sets) + 1)
    if message == "inventory":   # a resync: checked before n0 could be dropped or refiled
        sent = pb.AgentMessage(inventory=pb.Inventory(seq=7, nodes=[*good, bad],
                                                      label_sets=sets))
    else:
        sent = pb.AgentMessage(delta=pb.InventoryDelta(seq=agent.seq + 1, upserted=[*good, bad],
                                                       label_sets=sets))
    agent.send(sent)
    code = await asyncio.wait_for(agent.status(), 10)
    assert agent.call is not None
    assert code != grpc.StatusCode.OK
    assert (f"node 'n9': label_set {len(sets) + 1} names no set; the message carries "
            f"{len(sets)}") in (await agent.call.details() or "")
    assert infos(harness, "east") == {"n0": node}   # nothing of the message was filed
    await agent.close()


async def test_a_first_inventory_naming_no_set_files_nothing(harness: HubHarness) -> None:
    agent = RawAgent(harness.agent_address, "east")
    await agent.register(await join(harness, "east"))
    await agent.connect([])
    await until(harness, lambda: inventoried(harness, "east", 0))
    good, sets = encode([named("n1", "Tesla-T4", 1)])
    bad = pb.Node(name="n9", label_set=1, labels={"kubernetes.io/arch": "arm64"})
    agent.send(pb.AgentMessage(inventory=pb.Inventory(seq=5, nodes=[*good, bad],
                                                      label_sets=sets)))
    code = await asyncio.wait_for(agent.status(), 10)
    assert agent.call is not None
    assert code != grpc.StatusCode.OK
    assert ("node 'n9': label 'kubernetes.io/arch' is in both its labels and its label_set 1"
            in (await agent.call.details() or ""))
    assert infos(harness, "east") == {}
    await agent.close()


@pytest.mark.parametrize("announced", [True, False])
async def test_an_agent_sends_label_sets_only_to_a_hub_that_reads_them(
        tmp_path: Path, announced: bool) -> None:
    inventory = await first_inventory(tmp_path, label_sets=announced)
    assert inventory.nodes, "the simulated fleet has nodes"
    assert bool(inventory.label_sets) == announced
    assert all(bool(n.label_set) == announced for n in inventory.nodes)
    if announced:   # one set per distinct map (this fleet's two nodes differ)
        assert len(inventory.label_sets) <= len(inventory.nodes)


async def test_an_agent_sends_deltas_as_whole_maps(tmp_path: Path) -> None:
    """Sets are for inventories: a delta (most often one node, where a set saves no byte) goes
    as whole maps even to a hub that reads sets, which would otherwise expand it node by node
    (about twice the hub CPU of reading the maps, ``fuyao.labelsets.expand``)."""
    agent = make_agent(tmp_path, 1)
    agent._label_sets = agent._columns = True
    nodes = agent.backend.nodes()
    message = agent._message(NodesChanged(upserted=tuple(nodes[:2]), removed=("gone",)))
    delta = message.delta
    assert not delta.label_sets and list(delta.removed) == ["gone"]
    assert [n.label_set for n in delta.upserted] == [0, 0]
    assert [dict(n.labels) for n in delta.upserted] == [dict(n.labels) for n in nodes[:2]]
