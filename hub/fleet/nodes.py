"""One node as the hub sees it: the agent's report minus the hub's own reservations.

``FleetView`` keeps, per node, the last ``NodeInfo`` an agent reported and a ``Hold`` (what
hub reservations placed there but not yet bound). ``derive`` combines the two into an
immutable ``NodeState`` - effective free cpu, memory, pods and per-device free shares, plus
the per-model sums the cluster aggregates need - which the cluster index (``hub.fleet.cluster``)
files into its buckets and the fit search (``hub.fleet.fit``) reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fuyao.inventory import NodeInfo

WHOLE = 1000
"""Milli-devices in one whole card."""

NO_MODEL = "none"
"""The capacity row (and primary model) of nodes without accelerators."""

DeviceClass = tuple[str, int]
"""Devices that are interchangeable for placement: (model, memory MiB)."""


@dataclass(slots=True)
class Hold:
    """What hub reservations hold on one node: placed there, not yet bound by the member."""

    cpu_milli: int = 0
    memory_mib: int = 0
    pods: int = 0
    devices: dict[str, int] = field(default_factory=dict)   # device id -> milli

    def add(self, other: Hold, sign: int = 1) -> None:
        """Add (``sign=1``) or take away (``sign=-1``) another hold."""
        self.cpu_milli += sign * other.cpu_milli
        self.memory_mib += sign * other.memory_mib
        self.pods += sign * other.pods
        for dev, milli in other.devices.items():
            left = self.devices.get(dev, 0) + sign * milli
            if left:
                self.devices[dev] = left
            else:
                self.devices.pop(dev, None)

    @property
    def empty(self) -> bool:
        """True when nothing is held."""
        return not (self.cpu_milli or self.memory_mib or self.pods or self.devices)


class ClassSlot:
    """A node's devices of one class, with their effective free shares."""

    __slots__ = ("frees", "full", "ids", "partial")

    def __init__(self, ids: tuple[str, ...], frees: tuple[int, ...]) -> None:
        self.ids = ids
        self.frees = frees
        self.full = sum(1 for f in frees if f >= WHOLE)
        self.partial = max((f for f in frees if 0 < f < WHOLE), default=0)

    def share_capacity(self, milli: int) -> int:
        """How many shares of ``milli`` these devices can still give."""
        return sum(f // milli for f in self.frees)


class NodeState:
    """A node's effective state: reported free minus hub holds (read-only once built)."""

    __slots__ = (
        "classes", "cpu", "dev_free", "info", "labels", "mem", "model_devices", "model_used",
        "name", "pods", "primary", "schedulable", "used_cpu", "used_mem",
    )

    def __init__(self, info: NodeInfo, hold: Hold | None) -> None:
        held = hold or _NO_HOLD
        self.info = info
        self.name = info.name
        self.labels: Mapping[str, str] = info.labels
        self.schedulable = not info.unschedulable
        self.cpu = max(0, info.free.cpu_milli - held.cpu_milli)
        self.mem = max(0, info.free.memory_mib - held.memory_mib)
        self.pods = max(0, info.free.pods - held.pods)
        self.used_cpu = max(0, info.allocatable.cpu_milli - self.cpu)
        self.used_mem = max(0, info.allocatable.memory_mib - self.mem)
        self.dev_free: dict[str, int] = {}
        self.model_devices: dict[str, int] = {}
        self.model_used: dict[str, int] = {}
        grouped: dict[DeviceClass, tuple[list[str], list[int]]] = {}
        for dev in info.devices:
            free = min(WHOLE, max(0, dev.free_milli - held.devices.get(dev.id, 0)))
            self.dev_free[dev.id] = free
            self.model_devices[dev.model] = self.model_devices.get(dev.model, 0) + 1
            self.model_used[dev.model] = self.model_used.get(dev.model, 0) + WHOLE - free
            ids, frees = grouped.setdefault((dev.model, dev.memory_mib), ([], []))
            ids.append(dev.id)
            frees.append(free)
        self.classes = {
            cls: ClassSlot(tuple(ids), tuple(frees)) for cls, (ids, frees) in grouped.items()
        }
        self.primary = (
            min(self.model_devices, key=lambda m: (-self.model_devices[m], m))
            if self.model_devices else NO_MODEL
        )


_NO_HOLD = Hold()
