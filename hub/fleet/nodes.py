"""One node as the hub sees it: the agent's report minus the hub's own reservations.

``FleetView`` keeps, per node, the last ``NodeInfo`` an agent reported and a ``Hold`` (what
hub reservations placed there but not yet bound). ``derive`` combines the two into an
immutable ``NodeState`` - effective free cpu, memory, pods and per-device free shares, plus
the per-model sums the cluster aggregates need - which the cluster index (``hub.fleet.cluster``)
files into its buckets and the fit search (``hub.fleet.fit``) reads.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter
from types import MappingProxyType
from typing import Final, Protocol, TypeVar

from fuyao.inventory import Columns, DeviceInfo, NodeInfo, ResourceAmounts, device_columns
from fuyao.inventory import numbered as _numbered
from fuyao.wire.v1 import agent_pb2 as pb
from hub.fleet.readonly import NodeLabels, NumberedIds

WHOLE: Final = 1000
"""Milli-devices in one whole card."""

NO_MODEL: Final = "none"
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
    """A node's devices of one class: free shares as reported, effective ones, and counts.

    Holds no device ids (``NodeState.class_ids`` has them), so nodes whose devices of a class
    report the same shares share one slot (``_one_class``); read-only once built."""

    __slots__ = ("free_memory", "frees", "full", "partial", "reported")

    def __init__(self, frees: tuple[int, ...], reported: tuple[int, ...] | None = None,
                 free_memory: tuple[int, ...] = ()) -> None:
        self.frees = frees                                  # after hub holds
        self.reported = frees if reported is None else reported   # as the agent reported
        self.free_memory = free_memory                      # reported free MiB per device
        self.full, self.partial = _counts(frees)

    def share_capacity(self, milli: int) -> int:
        """How many shares of ``milli`` these devices can still give."""
        return sum(f // milli for f in self.frees)




def _same_labels(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """The same labels but for the values of per-node keys: for two filed labels, one label
    group (its labels are shared) and the same per-node keys, in any order. The filing paths
    keep a node's own keys in the order its report gave them, and the wire's maps give none:
    a node filed from a label set and then from a whole map (a delta) may hold its hostname
    and GFD timestamp either way round."""
    if a is b:
        return True
    if type(a) is NodeLabels and type(b) is NodeLabels:
        if not ((a.shared is b.shared or a.key == b.key) and len(a.own) == len(b.own)):
            return False
        return (all(x[0] == y[0] for x, y in zip(a.own, b.own, strict=True))
                or {k for k, _ in a.own} == {k for k, _ in b.own})
    return a == b

Reported = tuple[tuple[DeviceClass, Sequence[str], tuple[int, ...], tuple[int, ...]], ...]
"""A node's devices as reported, by class: (class, ids, free shares, free memory MiB)."""

Ids = tuple[tuple[str, ...], ...] | None
"""A node's device ids per class (in ``classes`` order), or None for the agents' naming:
``<node>/gpu0``, ``<node>/gpu1``, ... through the classes in order."""

OneClass = tuple[dict[DeviceClass, ClassSlot], Mapping[str, int], Mapping[str, int], str]
"""What a fresh report of one device class files: (classes, model_devices, model_used,
primary); primary is the one kept model string (a message from the wire brings a copy)."""


class AmountsReport(Protocol):
    """Amounts as a report gives them: ``ResourceAmounts``, or the wire's ``pb.Resources``."""

    @property
    def cpu_milli(self) -> int: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def pods(self) -> int: ...


class DeviceReport(Protocol):
    """One device as a report gives it: ``DeviceInfo``, or the wire's ``pb.Device``."""

    @property
    def id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def free_milli(self) -> int: ...
    @property
    def free_memory_mib(self) -> int: ...


class NodeReport(Protocol):
    """One node as a report gives it: ``NodeInfo``, or the wire's ``pb.Node`` as the agent
    channel receives it (filed without building a ``NodeInfo`` and its ``DeviceInfo``s: what
    a state keeps of it is read out, never the message itself)."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def allocatable(self) -> AmountsReport: ...
    @property
    def free(self) -> AmountsReport: ...
    @property
    def devices(self) -> Sequence[DeviceReport]: ...
    @property
    def unschedulable(self) -> bool: ...


class NodeState:
    """A node's effective state: reported free minus hub holds (read-only once built).

    It keeps no ``NodeInfo``: the report is held in compact form (shared allocatable,
    devices as per-class slots of reported free shares, their ids only when they are not
    the agents' naming, the order they came in only when it differs from class order) and
    ``info`` rebuilds an equal ``NodeInfo`` when asked (REST node lists, planning - off the
    placement path). Memory (a fleet holds one per node, 1,000,000 at 1,000 x 1,000): the
    per-model sums, the allocatable amounts and the free-share tuples are shared between
    nodes that have the same; so are, for a fresh report of one device class (most nodes),
    the ``classes`` mapping and its slot (nodes reporting the same shares share them: no
    per-node container the collector walks); ``dev_free`` is built when asked, and the used
    amounts are derived.
    """

    __slots__ = (
        "_free", "alloc", "classes", "cpu", "ids", "labels", "mem", "model_devices",
        "model_used", "name", "order", "pods", "primary", "schedulable",
    )

    def __init__(self, info: NodeReport | None, hold: Hold | None, name: str | None = None,
                 labels: Mapping[str, str] | None = None) -> None:
        """``name`` and ``labels``, when given, are ``info``'s as the caller already read
        them (a wire message gives new objects at each read): kept instead of read again.
        ``info`` None: a blank state for ``held`` to fill (``NodeState.__new__`` is not
        there when the module is compiled, ``hub.native``)."""
        if info is None:
            return
        if name is None:
            name = info.name   # read once: a wire message gives a new string at each read
        if labels is None:
            labels = info.labels
        order: tuple[int, ...] | None = None
        ids: Ids = None
        columns = _columns_of(info)
        if columns is not None:   # one class in the agents' naming, read as two lists
            model, memory_mib, frees, memory = columns
            cls = (model, memory_mib)
            if hold is None:
                self._fill_one(info, name, labels, cls, None, frees, memory)
                return
            reported: Reported = ((_interned(_classes_seen, cls), NumberedIds(name, 0, len(frees)),
                                   _shared_frees(frees), _shared_frees(memory)),)
        elif not (devices := info.devices):   # read only here: a wire read costs a wrapper
            reported = ()
        else:
            # one pass over the devices, fields transposed: (models, memories, ids, ...)
            models, memories, raw_ids, frees, memory = zip(
                *map(_device_fields, devices), strict=True)
            count = len(models)
            if models.count(models[0]) == count and memories.count(memories[0]) == count:
                cls = (models[0], memories[0])   # one class: most reports
                ids = None if _numbered(name, raw_ids) else (raw_ids,)
                if hold is None:   # a fresh report: _fill without its loops
                    self._fill_one(info, name, labels, cls, ids, frees, memory)
                    return
                reported = ((_interned(_classes_seen, cls), raw_ids, _shared_frees(frees),
                             _shared_frees(memory)),)
            else:
                reported, ids, order = _by_class(name, devices)
        self._fill(name, labels, _shared_amounts(info.allocatable), info.free,
                   not info.unschedulable, reported, ids, order, hold)

    def _fill_one(self, info: NodeReport, name: str, labels: Mapping[str, str],
                  cls: DeviceClass, ids: Ids, frees: tuple[int, ...],
                  memory: tuple[int, ...]) -> None:
        """``_fill`` for a report of one device class and no hold (what most reports are)."""
        # the shared caches read inline (``x.get(k) or f(k)``): one call less each, per node
        key = (cls, frees, memory)
        self.classes, self.model_devices, self.model_used, self.primary = (
            _one_class_seen.get(key) or _one_class(key))
        self.ids = ids
        self.name = name
        self.labels = labels
        alloc = info.allocatable
        self.alloc = (_amounts_seen.get((alloc.cpu_milli, alloc.memory_mib, alloc.pods))
                      or _shared_amounts(alloc))
        self.schedulable = not info.unschedulable
        self.order: tuple[int, ...] | None = None
        free = info.free
        cpu, mem, pods = free.cpu_milli, free.memory_mib, free.pods
        if cpu >= 0 and mem >= 0 and pods >= 0:   # as reported: no copy kept (``free``)
            self.cpu, self.mem, self.pods = cpu, mem, pods
            self._free: ResourceAmounts | None = None
        else:
            self._free = ResourceAmounts(cpu, mem, pods)
            self.cpu = cpu if cpu > 0 else 0
            self.mem = mem if mem > 0 else 0
            self.pods = pods if pods > 0 else 0

    @property
    def free(self) -> ResourceAmounts:
        """Free amounts as the node reported them (before hub holds, maybe negative); kept
        only when they differ from ``cpu``, ``mem`` and ``pods`` (a hold, a negative)."""
        free = self._free
        return ResourceAmounts(self.cpu, self.mem, self.pods) if free is None else free

    def held(self, hold: Hold | None) -> NodeState:
        """The same report with another hold (a reservation placed or given back)."""
        state = NodeState(None, None)
        classes = self.classes
        if hold is None and len(classes) == 1:
            # the last hold given back on a one-class node: what a fresh report of it files
            # (``_fill_one``'s kept slot and sums, equal to what ``_fill`` builds)
            [(cls, slot)] = classes.items()
            key = (cls, slot.reported, slot.free_memory)
            state.classes, state.model_devices, state.model_used, state.primary = (
                _one_class_seen.get(key) or _one_class(key))
            state.name, state.labels, state.alloc = self.name, self.labels, self.alloc
            state.schedulable, state.ids, state.order = self.schedulable, self.ids, self.order
            free = self.free
            cpu, mem, pods = free.cpu_milli, free.memory_mib, free.pods
            state._free = None if cpu >= 0 and mem >= 0 and pods >= 0 else free
            state.cpu = cpu if cpu > 0 else 0
            state.mem = mem if mem > 0 else 0
            state.pods = pods if pods > 0 else 0
            return state
        state._fill(self.name, self.labels, self.alloc, self.free, self.schedulable,
                    self.reported, self.ids, self.order, hold)
        return state

    def _fill(self, name: str, labels: Mapping[str, str], alloc: ResourceAmounts,
              free: AmountsReport, schedulable: bool, reported: Reported, ids: Ids,
              order: tuple[int, ...] | None, hold: Hold | None) -> None:
        self.name = name
        self.labels = labels
        self.alloc = alloc
        self.schedulable = schedulable
        self.ids = ids
        self.order = order
        cpu, mem, pods = free.cpu_milli, free.memory_mib, free.pods
        # kept only when it is not (cpu, mem, pods) below, and as our own type (a message's
        # is not kept)
        self._free = (None if hold is None and cpu >= 0 and mem >= 0 and pods >= 0
                      else free if type(free) is ResourceAmounts
                      else ResourceAmounts(cpu, mem, pods))
        if hold is None:
            held_devices = _NO_HOLD.devices
        else:
            cpu = free.cpu_milli - hold.cpu_milli
            mem = free.memory_mib - hold.memory_mib
            pods = free.pods - hold.pods
            held_devices = hold.devices
        self.cpu = cpu if cpu > 0 else 0
        self.mem = mem if mem > 0 else 0
        self.pods = pods if pods > 0 else 0
        if not reported:
            self.model_devices = self.model_used = _NO_DEVICES
            self.classes = _NO_CLASSES   # shared, as every state's classes: never mutated
            self.primary = NO_MODEL
            return
        model_devices: dict[str, int] = {}
        model_used: dict[str, int] = {}
        classes: dict[DeviceClass, ClassSlot] = {}
        for cls, class_ids, frees, memory in reported:
            effective = frees
            if held_devices or (frees and (max(frees) > WHOLE or min(frees) < 0)):
                effective = _shared_frees(_held_frees(class_ids, frees, held_devices))
            model = cls[0]
            model_devices[model] = model_devices.get(model, 0) + len(frees)
            model_used[model] = model_used.get(model, 0) + WHOLE * len(frees) - sum(effective)
            classes[cls] = ClassSlot(effective, frees, memory)
        self.model_devices = _shared(model_devices)
        self.model_used = _shared(model_used)
        self.classes = classes
        if len(model_devices) == 1:
            [self.primary] = model_devices
        else:
            self.primary = (min(model_devices, key=lambda m: (-model_devices[m], m))
                            if model_devices else NO_MODEL)

    def class_ids(self) -> list[Sequence[str]]:
        """Each class's device ids, in ``classes`` order."""
        if self.ids is not None:
            return list(self.ids)
        out: list[Sequence[str]] = []
        start = 0
        for slot in self.classes.values():
            size = len(slot.frees)
            out.append(NumberedIds(self.name, start, size))
            start += size
        return out

    @property
    def reported(self) -> Reported:
        """The devices as reported, by class (what ``held`` rebuilds from)."""
        return tuple((cls, ids, slot.reported, slot.free_memory)
                     for (cls, slot), ids in zip(self.classes.items(), self.class_ids(),
                                                 strict=True))

    def _devices(self) -> list[tuple[str, int, str, int, int]]:
        """(model, memory, id, free, free memory) of each device, in report order."""
        kept = [(model, memory, dev, free, free_memory)
                for ((model, memory), slot), ids in zip(self.classes.items(), self.class_ids(),
                                                        strict=True)
                for dev, free, free_memory in zip(ids, slot.reported, slot.free_memory,
                                                  strict=True)]
        return kept if self.order is None else [kept[k] for k in self.order]

    @property
    def info(self) -> NodeInfo:
        """The node's last report, rebuilt (equal to the ``NodeInfo`` it was built from)."""
        devices = tuple(DeviceInfo(dev, model, memory, free, free_memory)
                        for model, memory, dev, free, free_memory in self._devices())
        return NodeInfo(self.name, dict(self.labels), self.alloc, self.free, devices,
                        not self.schedulable)

    def reports(self, info: NodeReport) -> bool:
        """True when ``info`` is the report this state was built from (nothing changed).

        A resync asks it of every node: the devices are compared field by field, without
        rebuilding the report."""
        if not (info.name == self.name and info.unschedulable != self.schedulable
                and _amount_fields(info.free) == _amount_fields(self.free)
                and _amount_fields(info.allocatable) == _amount_fields(self.alloc)
                and self.labels == info.labels):
            return False
        columns = _columns_of(info)
        if columns is None:
            return list(map(_device_fields, info.devices)) == self._devices()
        model, memory_mib, frees, memory = columns
        return [(model, memory_mib, dev, free, free_mib) for dev, free, free_mib in zip(
            NumberedIds(self.name, 0, len(frees)), frees, memory, strict=True)] == self._devices()

    def offers_as(self, other: NodeState) -> bool:
        """True when ``other`` offers, empty, what this state offers: the same allocatable
        amounts, schedulability, labels and devices (classes and how many of each) - only
        their use, the hub's holds or the values of per-node label keys may differ (GPU
        feature discovery rewrites ``nvidia.com/gfd.timestamp`` on every node every minute;
        a selector naming such a key is never parked for it: ``hub.queueing.parking``).
        Both must be filed (their labels too)."""
        if self.alloc is not other.alloc and (
                _amount_fields(self.alloc) != _amount_fields(other.alloc)):
            return False
        if self.schedulable != other.schedulable or not _same_labels(self.labels, other.labels):
            return False
        mine, theirs = self.classes, other.classes
        return mine is theirs or (mine.keys() == theirs.keys() and all(
            len(slot.frees) == len(theirs[cls].frees) for cls, slot in mine.items()))

    @property
    def used_cpu(self) -> int:
        """Allocatable cpu not free (member use and hub holds)."""
        return max(0, self.alloc.cpu_milli - self.cpu)

    @property
    def used_mem(self) -> int:
        """Allocatable memory not free (member use and hub holds)."""
        return max(0, self.alloc.memory_mib - self.mem)

    @property
    def dev_free(self) -> dict[str, int]:
        """Device id -> effective free milli-share (a new dict, built from ``classes``)."""
        return {dev: free for slot, ids in zip(self.classes.values(), self.class_ids(),
                                               strict=True)
                for dev, free in zip(ids, slot.frees, strict=True)}


def _columns_of(info: NodeReport) -> Columns | None:
    """A wire node's devices as sent in columns (``fuyao.inventory.device_columns``), else
    None (a ``NodeInfo``, or devices sent one message each)."""
    return device_columns(info) if type(info) is pb.Node else None


def refuse_bad_reports(infos: Iterable[NodeReport]) -> None:
    """Raise ``InvalidInput`` for the first report whose devices break the wire's rules (what
    ``NodeState`` would raise on filing it), before anything is filed."""
    for info in infos:
        _columns_of(info)


def _held_frees(ids: Sequence[str], frees: tuple[int, ...],
                held: Mapping[str, int]) -> tuple[int, ...]:
    """Each device's free share less what ``held`` holds of it, within 0..``WHOLE``.

    Devices with the agents' ids (``NumberedIds``) are found by number from the held ids,
    without spelling out every id of the node (most holds are one card of eight)."""
    if not isinstance(ids, NumberedIds) or len(held) >= len(frees):
        return tuple(min(WHOLE, max(0, f - held.get(d, 0)))
                     for d, f in zip(ids, frees, strict=True))
    out = list(frees) if not frees or (max(frees) <= WHOLE and min(frees) >= 0) else [
        min(WHOLE, max(0, f)) for f in frees]
    prefix = ids.node + "/gpu"
    for device, milli in held.items():
        number = device[len(prefix):]
        if (device.startswith(prefix) and len(number) < 19 and number.isascii()
                and number.isdigit() and str(int(number)) == number):
            k = int(number) - ids.start
            if 0 <= k < ids.size:
                out[k] = min(WHOLE, max(0, frees[k] - milli))
    return tuple(out)


def _by_class(node: str, devices: Sequence[DeviceReport]) -> tuple[Reported, Ids,
                                                                 tuple[int, ...] | None]:
    """Devices of several classes, grouped by class: (reported, ids, where each device sits
    in class order or None when it is already there)."""
    seen = list(map(_device_class, devices))
    grouped: dict[DeviceClass, tuple[list[str], list[int], list[int]]] = {}
    for cls, dev in zip(seen, devices, strict=True):
        ids, frees, memory = grouped.setdefault(cls, ([], [], []))
        ids.append(dev.id)
        frees.append(dev.free_milli)
        memory.append(dev.free_memory_mib)
    order: tuple[int, ...] | None = _order(seen, grouped)
    reported = tuple((_interned(_classes_seen, cls), tuple(ids), _shared_frees(tuple(frees)),
                      _shared_frees(tuple(mem))) for cls, (ids, frees, mem) in grouped.items())
    kept = tuple(tuple(ids) for ids, _, _ in grouped.values())
    if order is None and _numbered(node, [d for ids in kept for d in ids]):
        return reported, None, order
    return reported, kept, order


def _order(
    seen: list[DeviceClass], grouped: Mapping[DeviceClass, object],
) -> tuple[int, ...] | None:
    """Where each reported device sits in class order, or None when it is already there."""
    if len(grouped) <= 1:
        return None
    rank = {cls: i for i, cls in enumerate(grouped)}
    if all(rank[a] <= rank[b] for a, b in pairwise(seen)):
        return None
    by_class = sorted(range(len(seen)), key=lambda k: (rank[seen[k]], k))
    back = [0] * len(seen)
    for position, k in enumerate(by_class):
        back[k] = position
    return tuple(back)


_amount_fields: Callable[[AmountsReport], tuple[int, int, int]] = attrgetter(
    "cpu_milli", "memory_mib", "pods")
_device_class = attrgetter("model", "memory_mib")
_device_fields = attrgetter("model", "memory_mib", "id", "free_milli", "free_memory_mib")
_counts_seen: dict[tuple[int, ...], tuple[int, int]] = {}


def _counts(frees: tuple[int, ...]) -> tuple[int, int]:
    """(wholly free cards, largest partly free share) of effective free shares."""
    found = _counts_seen.get(frees)
    if found is None:
        if len(_counts_seen) >= _SHARED_KEPT:
            _counts_seen.clear()
        # counted in C (no generator frame per call): a third of the nodes of a synthetic
        # fleet bring a share pattern not seen before
        found = _counts_seen[frees] = (sum(map(WHOLE.__le__, frees)),
                                       max(filter(_PARTLY.__contains__, frees), default=0))
    return found


_PARTLY: Final = range(1, WHOLE)   # a share that is part of a card


_amounts_seen: dict[tuple[int, int, int], ResourceAmounts] = {}
_classes_seen: dict[DeviceClass, DeviceClass] = {}


def _shared_amounts(amounts: AmountsReport) -> ResourceAmounts:
    """The one kept ``ResourceAmounts`` equal to ``amounts`` (node sizes repeat)."""
    key = (amounts.cpu_milli, amounts.memory_mib, amounts.pods)   # hashed without a call
    found = _amounts_seen.get(key)
    if found is None:
        if len(_amounts_seen) >= _SHARED_KEPT:
            _amounts_seen.clear()
        found = _amounts_seen[key] = (amounts if type(amounts) is ResourceAmounts
                                      else ResourceAmounts(*key))
    return found


_SHARED_KEPT: Final = 65_536
_K = TypeVar("_K", bound=Hashable)


def _interned(seen: dict[_K, _K], value: _K) -> _K:
    """The one kept object equal to ``value`` in ``seen`` (at most ``_SHARED_KEPT`` kept)."""
    found = seen.get(value)
    if found is None:
        if len(seen) >= _SHARED_KEPT:
            seen.clear()
        found = seen[value] = value
    return found
_shared_maps: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}


_frees_seen: dict[tuple[int, ...], tuple[int, ...]] = {}


def _shared_frees(frees: tuple[int, ...]) -> tuple[int, ...]:
    """The one kept tuple equal to ``frees`` (whole free cards repeat on most nodes)."""
    return _interned(_frees_seen, frees)


def _shared(counts: dict[str, int]) -> Mapping[str, int]:
    """One read-only mapping per distinct content, shared by every node that has it."""
    key = tuple(counts.items())
    found = _shared_maps.get(key)
    if found is None:
        if len(_shared_maps) >= _SHARED_KEPT:
            _shared_maps.clear()   # nodes keep theirs; new ones start sharing afresh
        found = _shared_maps[key] = MappingProxyType(counts)
    return found


def _shared_one(model: str, count: int) -> Mapping[str, int]:
    """``_shared({model: count})``, without building the dict when it is kept already."""
    found = _shared_maps.get(((model, count),))
    return _shared({model: count}) if found is None else found


_one_class_seen: dict[tuple[DeviceClass, tuple[int, ...], tuple[int, ...]], OneClass] = {}


def _one_class(key: tuple[DeviceClass, tuple[int, ...], tuple[int, ...]]) -> OneClass:
    """The one kept (classes, model_devices, model_used, primary) of a fresh one-class
    report whose devices report ``key`` = (class, free shares, free memory MiB)."""
    cls, frees, memory = key
    cls = _interned(_classes_seen, cls)
    reported = effective = _shared_frees(frees)
    if max(frees) > WHOLE or min(frees) < 0:
        effective = _shared_frees(tuple(min(WHOLE, max(0, f)) for f in frees))
    model, count = cls[0], len(frees)
    used = WHOLE * count - sum(effective)
    memory = _shared_frees(memory)
    if len(_one_class_seen) >= _SHARED_KEPT:
        _one_class_seen.clear()   # nodes keep theirs; new ones start sharing afresh
    found = _one_class_seen[(cls, reported, memory)] = (
        {cls: ClassSlot(effective, reported, memory)},
        _shared_one(model, count), _shared_one(model, used), model)
    return found


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (restored after, if it was on).

    For a whole inventory: decoding it and filing it allocate ~10 tracked objects per node
    and make no reference cycles, yet each 700 allocations start a collector pass, and the
    passes that reach the oldest generation walk every node state of the fleet (a large
    part of the ingest at 1,000,000 nodes). Refcounting frees what the inventory drops as
    before; the collector runs again at the next allocation after.
    """
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


_NO_HOLD: Final = Hold()
_NO_DEVICES: Mapping[str, int] = _shared({})
_NO_CLASSES: dict[DeviceClass, ClassSlot] = {}
