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
    return ResourceAmounts(cpu_milli=r.cpu_milli, memory_mib=r.memory_mib, pods=r.pods)


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
    return NodeInfo(
        name=msg.name,
        labels=dict(msg.labels),
        allocatable=_resources_from_proto(msg.allocatable),
        free=_resources_from_proto(msg.free),
        devices=tuple(
            DeviceInfo(
                id=d.id,
                model=d.model,
                memory_mib=d.memory_mib,
                free_milli=d.free_milli,
                free_memory_mib=d.free_memory_mib,
            )
            for d in msg.devices
        ),
        unschedulable=msg.unschedulable,
    )
