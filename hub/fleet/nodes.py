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
from types import MappingProxyType

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
    """A node's effective state: reported free minus hub holds (read-only once built).

    Memory (a fleet holds one per node, 1,000,000 at 1,000 x 1,000): the per-model sums and
    the free shares per class are shared (most nodes of a fleet have one of a few device
    configurations and free patterns), the per-device free shares live only in ``classes``
    (``dev_free`` is built when asked, off the hot path), and the used amounts are derived.
    """

    __slots__ = (
        "classes", "cpu", "info", "labels", "mem", "model_devices", "model_used", "name",
        "pods", "primary", "schedulable",
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
        model_devices: dict[str, int] = {}
        model_used: dict[str, int] = {}
        grouped: dict[DeviceClass, tuple[list[str], list[int]]] = {}
        held_devices = held.devices
        for dev in info.devices:
            free = min(WHOLE, max(0, dev.free_milli - held_devices.get(dev.id, 0)))
            model_devices[dev.model] = model_devices.get(dev.model, 0) + 1
            model_used[dev.model] = model_used.get(dev.model, 0) + WHOLE - free
            ids, frees = grouped.setdefault((dev.model, dev.memory_mib), ([], []))
            ids.append(dev.id)
            frees.append(free)
        self.model_devices = _shared(model_devices)
        self.model_used = _shared(model_used)
        self.classes = {
            cls: ClassSlot(tuple(ids), _shared_frees(tuple(frees)))
            for cls, (ids, frees) in grouped.items()
        }
        self.primary = (
            min(model_devices, key=lambda m: (-model_devices[m], m))
            if model_devices else NO_MODEL
        )

    @property
    def used_cpu(self) -> int:
        """Allocatable cpu not free (member use and hub holds)."""
        return max(0, self.info.allocatable.cpu_milli - self.cpu)

    @property
    def used_mem(self) -> int:
        """Allocatable memory not free (member use and hub holds)."""
        return max(0, self.info.allocatable.memory_mib - self.mem)

    @property
    def dev_free(self) -> dict[str, int]:
        """Device id -> effective free milli-share (a new dict, built from ``classes``)."""
        return {dev: free for slot in self.classes.values()
                for dev, free in zip(slot.ids, slot.frees, strict=True)}


_SHARED_KEPT = 65_536
_shared_maps: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}


_frees_seen: dict[tuple[int, ...], tuple[int, ...]] = {}


def _shared_frees(frees: tuple[int, ...]) -> tuple[int, ...]:
    """The one kept tuple equal to ``frees`` (whole free cards repeat on most nodes)."""
    found = _frees_seen.get(frees)
    if found is None:
        if len(_frees_seen) >= _SHARED_KEPT:
            _frees_seen.clear()
        found = _frees_seen[frees] = frees
    return found


def _shared(counts: dict[str, int]) -> Mapping[str, int]:
    """One read-only mapping per distinct content, shared by every node that has it."""
    key = tuple(counts.items())
    found = _shared_maps.get(key)
    if found is None:
        if len(_shared_maps) >= _SHARED_KEPT:
            _shared_maps.clear()   # nodes keep theirs; new ones start sharing afresh
        found = _shared_maps[key] = MappingProxyType(counts)
    return found


_NO_HOLD = Hold()
