"""A node survives the wire: ``node_from_proto(node_to_proto(n)) == n``, and what comes back
is the frozen dataclass the agent built (equal, devices hashable, not writable), even though the
hub's decoder sets a device's slots directly."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts, node_from_proto, node_to_proto
from fuyao.wire.v1 import agent_pb2 as pb

amounts = st.builds(ResourceAmounts, st.integers(0, 2**40), st.integers(0, 2**40),
                    st.integers(0, 1000))
devices = st.builds(DeviceInfo, st.text(max_size=12), st.text(max_size=6),
                    st.integers(0, 2**20), st.integers(0, 1000), st.integers(0, 2**20))
nodes = st.builds(NodeInfo, st.text(min_size=1, max_size=12),
                  st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=5),
                  amounts, amounts, st.lists(devices, max_size=6).map(tuple), st.booleans())


@given(node=nodes)
def test_a_node_comes_back_from_the_wire_as_it_went(node: NodeInfo) -> None:
    back = node_from_proto(pb.Node.FromString(node_to_proto(node).SerializeToString()))
    assert back == node and hash(back.devices) == hash(node.devices)
    assert [dataclasses.astuple(d) for d in back.devices] == [
        dataclasses.astuple(d) for d in node.devices]


def test_a_decoded_device_is_frozen() -> None:
    node = NodeInfo("n1", {}, devices=(DeviceInfo("n1/gpu0", "A100", 81920, 500, 1024),))
    [device] = node_from_proto(node_to_proto(node)).devices
    assert device == node.devices[0] and repr(device) == repr(node.devices[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.free_milli = 1000  # type: ignore[misc]
