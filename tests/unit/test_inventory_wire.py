"""A node survives the wire: ``node_from_proto(node_to_proto(n)) == n``, and what comes back
is the frozen dataclass the agent built (equal, devices hashable, not writable), even though the
hub's decoder sets a device's slots directly. The same with devices sent as ``DeviceColumns``
(``columns=True``), which a node in the agents' naming with one device class gets, and a
node that breaks the columns' rules is refused with the reason."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from fuyao.inventory import (
    MAX_DEVICES_PER_NODE,
    DeviceInfo,
    NodeInfo,
    ResourceAmounts,
    device_columns,
    node_from_proto,
    node_to_proto,
)
from fuyao.wire.v1 import agent_pb2 as pb

amounts = st.builds(ResourceAmounts, st.integers(0, 2**40), st.integers(0, 2**40),
                    st.integers(0, 1000))
devices = st.builds(DeviceInfo, st.text(max_size=12), st.text(max_size=6),
                    st.integers(0, 2**20), st.integers(0, 1000), st.integers(0, 2**20))
nodes = st.builds(NodeInfo, st.text(min_size=1, max_size=12),
                  st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=5),
                  amounts, amounts, st.lists(devices, max_size=6).map(tuple), st.booleans())




@st.composite
def agent_nodes(draw: st.DrawFn) -> NodeInfo:
    """Nodes as agents name their devices (``<node>/gpu<i>``), mostly of one class."""
    name = draw(st.text(min_size=1, max_size=12))
    classes = draw(st.lists(st.sampled_from([("A100", 81920), ("T4", 16384), ("", 0)]),
                            min_size=1, max_size=2))
    shares = draw(st.lists(st.tuples(st.sampled_from(classes), st.integers(-5, 1200),
                                     st.integers(0, 2**20)), max_size=8))
    return NodeInfo(name, draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8),
                                               max_size=3)),
                    draw(amounts), draw(amounts),
                    tuple(DeviceInfo(f"{name}/gpu{i}", model, memory, free, free_memory)
                          for i, ((model, memory), free, free_memory) in enumerate(shares)),
                    draw(st.booleans()))


@given(node=nodes | agent_nodes(), columns=st.booleans())
def test_a_node_comes_back_from_the_wire_as_it_went(node: NodeInfo, columns: bool) -> None:
    sent = node_to_proto(node, columns)
    back = node_from_proto(pb.Node.FromString(sent.SerializeToString()))
    assert back == node and hash(back.devices) == hash(node.devices)
    assert [dataclasses.astuple(d) for d in back.devices] == [
        dataclasses.astuple(d) for d in node.devices]


def test_a_decoded_device_is_frozen() -> None:
    node = NodeInfo("n1", {}, devices=(DeviceInfo("n1/gpu0", "A100", 81920, 500, 1024),))
    [device] = node_from_proto(node_to_proto(node)).devices
    assert device == node.devices[0] and repr(device) == repr(node.devices[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.free_milli = 1000  # type: ignore[misc]


@given(node=agent_nodes())
def test_devices_go_in_columns_exactly_when_they_can(node: NodeInfo) -> None:
    """One model and memory in the agents' naming: columns, no device messages; else (or
    without ``columns``) one message per device, as before."""
    one_class = len({(d.model, d.memory_mib) for d in node.devices}) == 1
    sent = node_to_proto(node, columns=True)
    assert sent.HasField("device_columns") == one_class
    assert len(sent.devices) == (0 if one_class else len(node.devices))
    assert not node_to_proto(node).HasField("device_columns")
    if one_class:
        assert device_columns(sent) == (node.devices[0].model, node.devices[0].memory_mib,
                                        tuple(d.free_milli for d in node.devices),
                                        tuple(d.free_memory_mib for d in node.devices))


def test_a_node_with_devices_in_both_forms_is_refused() -> None:
    node = pb.Node(name="n1", devices=[pb.Device(id="n1/gpu0", model="T4")],
                   device_columns=pb.DeviceColumns(model="T4", free_milli=[1000],
                                                   free_memory_mib=[0]))
    with pytest.raises(InvalidInput, match="devices and device_columns are both set"):
        node_from_proto(node)


def test_columns_of_two_lengths_are_refused() -> None:
    node = pb.Node(name="n1", device_columns=pb.DeviceColumns(
        model="T4", free_milli=[1000, 1000], free_memory_mib=[0]))
    with pytest.raises(InvalidInput, match="lists 2 free shares and 1 free memories"):
        node_from_proto(node)


def test_empty_columns_are_a_node_without_devices() -> None:
    node = pb.Node(name="n1", device_columns=pb.DeviceColumns(model="T4"))
    assert node_from_proto(node).devices == ()


@pytest.mark.parametrize("columns", [True, False])
def test_a_node_with_more_devices_than_any_node_has_is_refused(columns: bool) -> None:
    """Either form is bounded (``MAX_DEVICES_PER_NODE``): the hub refuses the node, as it
    refuses a node breaking the columns' rules; the bound itself still goes through."""
    def node(count: int) -> pb.Node:
        return node_to_proto(NodeInfo(
            "n0", {}, ResourceAmounts(1, 1, 1), ResourceAmounts(1, 1, 1),
            tuple(DeviceInfo(f"n0/gpu{i}", "T4", 16384, 1000, 16384) for i in range(count))),
            columns)
    fits = node(MAX_DEVICES_PER_NODE)
    assert fits.HasField("device_columns") == columns
    assert len(node_from_proto(fits).devices) == MAX_DEVICES_PER_NODE
    with pytest.raises(InvalidInput, match=f"{MAX_DEVICES_PER_NODE + 1} devices, more than"):
        device_columns(node(MAX_DEVICES_PER_NODE + 1))
