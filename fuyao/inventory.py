"""A member's node inventory as plain frozen dataclasses, and their wire conversion.

The agent builds ``NodeInfo`` from its backend (simulated fleet or Kubernetes nodes) and
sends it with ``node_to_proto``; the hub turns it back with ``node_from_proto`` and feeds
its fleet view. Quantities are fixed units: cpu millicores, memory MiB, device shares in
milli-devices (1000 = a whole card).

A node's devices go on the wire as one ``Device`` message each, or - to a hub that announced
the ``device-columns`` feature, for devices of one model and memory in the agents' naming
(``<node>/gpu0``, ``<node>/gpu1``, ...) - as one ``DeviceColumns`` (``columns=True``): the
same node, read by the hub without a message per device (``device_columns``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from fuyao.errors import InvalidInput
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


MAX_DEVICES_PER_NODE = 1024
"""A node reporting more devices is a typo or a broken agent, not hardware: refused."""

Columns = tuple[str, int, tuple[int, ...], tuple[int, ...]]
"""A node's devices as ``DeviceColumns`` carry them: model, memory MiB, and per device (ids
``<node>/gpu0``, ``<node>/gpu1``, ... in order) its free share and free memory MiB."""


def node_to_proto(node: NodeInfo, columns: bool = False, *,
                  labels: Mapping[str, str] | None = None, label_set: int = 0) -> pb.Node:
    """Wire form of a node; with ``columns``, its devices as ``DeviceColumns`` when they can
    be said that way (one model and memory, the agents' naming), else one message each.
    ``labels`` and ``label_set``: the node's own labels and the set it names instead of its
    whole map (``fuyao.labelsets.encode``)."""
    sent = dict(node.labels if labels is None else labels)
    found = _columns(node.name, node.devices) if columns and node.devices else None
    if found is not None:
        return pb.Node(
            name=node.name,
            labels=sent,
            label_set=label_set,
            allocatable=_resources_to_proto(node.allocatable),
            free=_resources_to_proto(node.free),
            device_columns=found,
            unschedulable=node.unschedulable,
        )
    return pb.Node(
        name=node.name,
        labels=sent,
        label_set=label_set,
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


_NUMBERS = tuple(map(str, range(256)))


def numbered(node: str, ids: Sequence[str]) -> bool:
    """True when ``ids`` are ``<node>/gpu0``, ``<node>/gpu1``, ... (the agents' naming,
    ``fuyao.labels.devices_for``).

    Compared as two strings joined by NUL, no id built: when ``node`` has no NUL, equal
    strings split at NUL into the same pieces, so there is one id per piece, the one expected."""
    count = len(ids)
    if count > len(_NUMBERS) or "\0" in node:
        return tuple(ids) == tuple(f"{node}/gpu{i}" for i in range(count))
    prefix = node + "/gpu"
    return not count or "\0".join(ids) == prefix + ("\0" + prefix).join(_NUMBERS[:count])


_fields = attrgetter("model", "memory_mib", "id", "free_milli", "free_memory_mib")


def _columns(name: str, devices: tuple[DeviceInfo, ...]) -> pb.DeviceColumns | None:
    """``devices`` as ``DeviceColumns`` when they are of one model and memory in the agents'
    naming, else None."""
    models, memories, ids, frees, free_memory = zip(*map(_fields, devices), strict=True)
    count = len(models)
    if (models.count(models[0]) != count or memories.count(memories[0]) != count
            or not numbered(name, ids)):
        return None
    return pb.DeviceColumns(model=models[0], memory_mib=memories[0], free_milli=frees,
                            free_memory_mib=free_memory)


def device_columns(msg: pb.Node) -> Columns | None:
    """The node's devices as its ``DeviceColumns`` give them, or None when it sent none that
    way; a node that sent both forms, lists of two lengths, or more than
    ``MAX_DEVICES_PER_NODE`` devices in either form is refused (``InvalidInput``)."""
    if not msg.HasField("device_columns"):
        if len(msg.devices) > MAX_DEVICES_PER_NODE:
            raise InvalidInput(f"node {msg.name!r}: {len(msg.devices)} devices, more than "
                               f"{MAX_DEVICES_PER_NODE}")
        return None
    columns = msg.device_columns
    # ``[:]`` first: a repeated field gives a list at C speed, iterating it does not (4x)
    frees = tuple(columns.free_milli[:])
    memory = tuple(columns.free_memory_mib[:])
    if len(frees) != len(memory):
        raise InvalidInput(f"node {msg.name!r}: device_columns lists {len(frees)} free shares "
                           f"and {len(memory)} free memories; one of each per device")
    if len(frees) > MAX_DEVICES_PER_NODE:
        raise InvalidInput(f"node {msg.name!r}: {len(frees)} devices, more than "
                           f"{MAX_DEVICES_PER_NODE}")
    if not frees:
        return None
    if msg.devices:
        raise InvalidInput(f"node {msg.name!r}: devices and device_columns are both set; "
                           "an agent sends one or the other")
    return columns.model, columns.memory_mib, frees, memory


def column_devices(name: str, columns: Columns) -> tuple[DeviceInfo, ...]:
    """The ``DeviceInfo``s a node's ``DeviceColumns`` stand for (slots set directly, as
    ``_device_from_proto`` sets them)."""
    model, memory, frees, free_memory = columns
    out: list[DeviceInfo] = []
    for i, (free, free_mib) in enumerate(zip(frees, free_memory, strict=True)):
        device = _new(DeviceInfo)
        _set_id(device, f"{name}/gpu{i}")
        _set_model(device, model)
        _set_memory(device, memory)
        _set_free(device, free)
        _set_free_memory(device, free_mib)
        out.append(device)
    return tuple(out)


def node_from_proto(msg: pb.Node) -> NodeInfo:
    """A node from the wire (its devices as messages or in columns)."""
    labels = msg.labels   # read key by key: dict(labels) iterates through a Python KeysView
    name = msg.name
    columns = device_columns(msg)
    devices = (tuple(map(_device_from_proto, msg.devices)) if columns is None
               else column_devices(name, columns))
    return NodeInfo(name, {key: labels[key] for key in labels},
                    _resources_from_proto(msg.allocatable),
                    _resources_from_proto(msg.free), devices, msg.unschedulable)
