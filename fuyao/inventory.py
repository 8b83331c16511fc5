"""A member's node inventory as plain frozen dataclasses, and their wire conversion.

The agent builds ``NodeInfo`` from its backend (simulated fleet or Kubernetes nodes) and
sends it with ``node_to_proto``; the hub turns it back with ``node_from_proto`` and feeds
its fleet view. Quantities are fixed units: cpu millicores, memory MiB, device shares in
milli-devices (1000 = a whole card).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fuyao.wire.v1 import agent_pb2 as pb


@dataclass(frozen=True, slots=True)
class ResourceAmounts:
    """cpu (millicores), memory (MiB) and pod slots."""

    cpu_milli: int = 0
    memory_mib: int = 0
    pods: int = 0


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One accelerator device and what is left of it."""

    id: str
    model: str
    memory_mib: int
    free_milli: int = 1000
    free_memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of a member cluster, labels already normalized to ``fuyao.io/*``."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: ResourceAmounts = ResourceAmounts()
    free: ResourceAmounts = ResourceAmounts()
    devices: tuple[DeviceInfo, ...] = ()
    unschedulable: bool = False


def _resources_to_proto(r: ResourceAmounts) -> pb.Resources:
    return pb.Resources(cpu_milli=r.cpu_milli, memory_mib=r.memory_mib, pods=r.pods)


def _resources_from_proto(r: pb.Resources) -> ResourceAmounts:
    return ResourceAmounts(r.cpu_milli, r.memory_mib, pods=r.pods)


_new = object.__new__
_set_id, _set_model, _set_memory, _set_free, _set_free_memory = (
    DeviceInfo.__dict__[name].__set__
    for name in ("id", "model", "memory_mib", "free_milli", "free_memory_mib"))


def _device_from_proto(d: pb.Device) -> DeviceInfo:
    """A ``DeviceInfo`` with its slots set directly: what the frozen dataclass's ``__init__``
    does through ``object.__setattr__``, without looking each field up by name (a hub decodes
    about 5 per node, 1,000,000 nodes at 1,000 x 1,000)."""
    device = _new(DeviceInfo)
    _set_id(device, d.id)
    _set_model(device, d.model)
    _set_memory(device, d.memory_mib)
    _set_free(device, d.free_milli)
    _set_free_memory(device, d.free_memory_mib)
    return device


def node_to_proto(node: NodeInfo) -> pb.Node:
    """Wire form of a node."""
    return pb.Node(
        name=node.name,
        labels=dict(node.labels),
        allocatable=_resources_to_proto(node.allocatable),
        free=_resources_to_proto(node.free),
        devices=[
            pb.Device(
                id=d.id,
                model=d.model,
                memory_mib=d.memory_mib,
                free_milli=d.free_milli,
                free_memory_mib=d.free_memory_mib,
            )
            for d in node.devices
        ],
        unschedulable=node.unschedulable,
    )


def node_from_proto(msg: pb.Node) -> NodeInfo:
    """A node from the wire."""
    labels = msg.labels   # read key by key: dict(labels) iterates through a Python KeysView
    return NodeInfo(msg.name, {key: labels[key] for key in labels},
                    _resources_from_proto(msg.allocatable),
                    _resources_from_proto(msg.free), tuple(map(_device_from_proto, msg.devices)),
                    msg.unschedulable)
