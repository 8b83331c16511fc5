"""One member cluster in the fleet view: its settings, its node index and its aggregates.

``FleetView`` owns every ``ClusterInfo`` and is the only caller of the underscored
mutators; placement plugins and the REST API only read. The index answers "could this
cluster host that?" without scanning all nodes:

- nodes are grouped by label set (minus per-node keys such as ``kubernetes.io/hostname``),
  so a selector is evaluated once per group, and the list of groups a selector matches is
  cached until the cluster's group layout changes;
- inside a group, schedulable nodes sit in buckets: by free cpu (power-of-two buckets), and
  per device class (model, device memory) by number of wholly free cards and by the largest
  partly free share, so a request looks only at buckets that can hold it;
- per cluster and per model, totals and used amounts are kept as running sums (headroom,
  capacity rows, nearest fit) and updated on every node change.

Every change stamps ``version`` with a fleet-wide increasing tick; the scheduler caches a
cluster's filter verdicts by it. Finer stamps say what changed, so a cached fit search stays
valid while the nodes it read did not change: ``model_version(m)`` moves when a node with
devices of model ``m`` (``NO_MODEL``: a node without devices) is added, changed or removed,
and ``layout_version`` when label groups, their device classes or "some node is
schedulable" change; ``settings_version`` when the cluster's own settings (labels, weight,
headroom, state, cordon, taints) change; ``capacity_version`` when what the cluster could
offer empty changes: a node added or removed, or reported with other allocatable amounts,
schedulability, labels or devices (not when only their use, a hub hold or the value of a
per-node label key changes) - what "could this ever fit here?" reads
(``hub.queueing.parking``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Final

from fuyao.errors import InvalidInput
from fuyao.labelsets import check_sets, named_set
from fuyao.selector import Selector
from fuyao.spec import ClusterState, TaskRequests
from fuyao.taints import Taint
from fuyao.wire.v1 import agent_pb2 as pb
from hub.fleet.nodes import (
    NO_MODEL,
    WHOLE,
    ClassSlot,
    DeviceClass,
    Hold,
    NodeReport,
    NodeState,
    collector_paused,
)
from hub.fleet.readonly import NodeLabels

_TICKS: Final = itertools.count(1)
_CPU_BUCKETS: Final = 48
_SHARE_BUCKETS: Final = 10
_MATCH_MEMO_LIMIT: Final = 100_000
_SELECTORS_KEPT: Final = 1024
_KEYS_KEPT: Final = 64   # label keys whose groups a cluster keeps by value (``_places_by_value``)
_CHANGES_KEPT: Final = 64

LabelKey = frozenset[tuple[str, str]]
_SORT_KEY: Final = attrgetter("sort_key")
_READY: Final = ClusterState.READY   # read per call: an enum member through a name


class MatchMemo:
    """Selector verdicts on label groups, fleet-wide (one per ``FleetView``): per selector
    text, the labels' values at the keys it reads (one key: the value itself) -> verdict.
    At most ``_MATCH_MEMO_LIMIT`` entries in all (a selector's own slot counts as one, so
    selectors that never get a verdict are bounded too): full, it starts over."""

    __slots__ = ("_by_selector", "_size")

    def __init__(self) -> None:
        self._by_selector: dict[str, dict[object, bool]] = {}
        self._size = 0

    def verdicts(self, key: str) -> dict[object, bool]:
        """The verdicts kept for selector text ``key`` (read them; add through ``keep``)."""
        found = self._by_selector.get(key)
        if found is None:
            if self._size >= _MATCH_MEMO_LIMIT:
                self.clear()
            found = self._by_selector[key] = {}
            self._size += 1
        return found

    def keep(self, key: str, read: object, verdict: bool) -> dict[object, bool]:
        """Keep a verdict; the selector's verdicts as kept now (new if the memo started over)."""
        if self._size >= _MATCH_MEMO_LIMIT:
            self.clear()
        found = self.verdicts(key)   # after a clear: a new slot, counted
        found[read] = verdict
        self._size += 1
        return found

    def clear(self) -> None:
        """Forget every verdict."""
        self._by_selector.clear()
        self._size = 0


class ClassIndex:
    """A group's schedulable nodes with devices of one class, bucketed by what is free."""

    __slots__ = ("cls", "free_milli", "full", "partial")

    def __init__(self, cls: DeviceClass) -> None:
        self.cls = cls
        self.full: list[dict[str, NodeState]] = []   # [n] = nodes with n wholly free cards
        self.partial: list[dict[str, NodeState]] = [{} for _ in range(_SHARE_BUCKETS)]
        self.free_milli = 0

    def add(self, node: NodeState, slot: ClassSlot) -> None:
        """File a node under its free counts."""
        while len(self.full) <= slot.full:
            self.full.append({})
        self.full[slot.full][node.name] = node
        if slot.partial:
            self.partial[slot.partial // 100][node.name] = node
        self.free_milli += sum(slot.frees)

    def remove(self, node: NodeState, slot: ClassSlot) -> None:
        """Take a node out of its buckets."""
        del self.full[slot.full][node.name]
        while self.full and not self.full[-1]:
            self.full.pop()
        if slot.partial:
            del self.partial[slot.partial // 100][node.name]
        self.free_milli -= sum(slot.frees)

    @property
    def empty(self) -> bool:
        """True when no node is filed here."""
        return not self.full and not any(self.partial)

    def can_host(self, gpu_milli: int) -> bool:
        """O(1) reject: could some node here give one replica ``gpu_milli``?"""
        if gpu_milli >= WHOLE:
            return len(self.full) > gpu_milli // WHOLE
        if len(self.full) > 1:
            return True
        return any(self.partial[b] for b in range(gpu_milli // 100, _SHARE_BUCKETS))


class Group:
    """Nodes of one cluster that carry the same labels (per-node keys aside)."""

    __slots__ = (
        "_class_matches", "classes", "cpu_buckets", "cpu_top", "free_cpu", "gpu_nodes", "key",
        "labels", "nodes", "sort_key",
    )

    def __init__(self, key: LabelKey) -> None:
        self.key = key
        self.labels: dict[str, str] = dict(key)
        self.sort_key = ",".join(f"{k}={v}" for k, v in sorted(key))
        self.nodes: dict[str, NodeState] = {}
        self.cpu_buckets: list[dict[str, NodeState]] = [{} for _ in range(_CPU_BUCKETS)]
        self.cpu_top = 0   # highest bucket that may be non-empty
        self.classes: dict[DeviceClass, ClassIndex] = {}
        self._class_matches: tuple[ClassMatch, ...] | None = None   # of ``classes``
        self.gpu_nodes = 0
        self.free_cpu = 0

    def class_matches(self) -> tuple[ClassMatch, ...]:
        """(model, device memory, index) of each class, in ``classes``' order; kept until a
        class index is made or dropped (every selector matching the group reads them)."""
        found = self._class_matches
        if found is None:
            found = self._class_matches = tuple(
                [(cls[0], cls[1], index) for cls, index in self.classes.items()])
        return found

    def add(self, node: NodeState) -> bool:
        """Add a node (only schedulable ones go into buckets); True if a class index was made."""
        self.nodes[node.name] = node
        self.gpu_nodes += bool(node.classes)
        if not node.schedulable:
            return False
        bucket = cpu_bucket(node.cpu)
        self.cpu_buckets[bucket][node.name] = node
        self.cpu_top = max(self.cpu_top, bucket)
        self.free_cpu += node.cpu
        created = False
        for cls, slot in node.classes.items():
            index = self.classes.get(cls)
            if index is None:
                index = self.classes[cls] = ClassIndex(cls)
                self._class_matches = None
                created = True
            index.add(node, slot)
        return created

    def add_all(self, nodes: Iterable[NodeState]) -> None:
        """``add`` each node in turn (the same buckets, filled in the same order), with the
        group's fields read once and the sums added once."""
        own, buckets, classes = self.nodes, self.cpu_buckets, self.classes
        top, gpu_nodes, free_cpu = self.cpu_top, 0, 0
        last = _CPU_BUCKETS - 1
        for node in nodes:
            name = node.name
            own[name] = node
            node_classes = node.classes
            if node_classes:
                gpu_nodes += 1
            if not node.schedulable:
                continue
            cpu = node.cpu
            bucket = cpu.bit_length()
            if bucket > last:
                bucket = last
            buckets[bucket][name] = node
            if bucket > top:
                top = bucket
            free_cpu += cpu
            for cls, slot in node_classes.items():
                index = classes.get(cls)
                if index is None:
                    index = classes[cls] = ClassIndex(cls)
                    self._class_matches = None
                index.add(node, slot)
        self.cpu_top, self.gpu_nodes, self.free_cpu = top, self.gpu_nodes + gpu_nodes, (
            self.free_cpu + free_cpu)

    def remove(self, node: NodeState) -> None:
        """Take out a node added before; its emptied class indexes stay until ``tidy``."""
        del self.nodes[node.name]
        self.gpu_nodes -= bool(node.classes)
        if not node.schedulable:
            return
        del self.cpu_buckets[cpu_bucket(node.cpu)][node.name]
        while self.cpu_top and not self.cpu_buckets[self.cpu_top]:
            self.cpu_top -= 1
        self.free_cpu -= node.cpu
        for cls, slot in node.classes.items():
            self.classes[cls].remove(node, slot)

    def tidy(self, classes: Iterable[DeviceClass]) -> bool:
        """Drop the indexes of these classes that are empty; True if there were any."""
        empty = [cls for cls in classes if cls in self.classes and self.classes[cls].empty]
        for cls in empty:
            del self.classes[cls]
            self._class_matches = None
        return bool(empty)


class _Layout:
    """Reports whose labels have these keys in this order: which of them group nodes and
    which are per-node keys (``own``, the one copy of each). ``pick`` reads the values of
    both in one call, the grouped ones first: ``values[:split]`` group the node,
    ``values[split:]`` are its own (no second read of the labels for them)."""

    __slots__ = ("grouped", "own", "pick", "split")

    def __init__(self, names: tuple[str, ...], ignore: frozenset[str],
                 keys: Mapping[str, str]) -> None:
        self.grouped = tuple(k for k in names if k not in ignore)
        self.own = tuple(keys[k] for k in names if k in ignore)
        self.split = len(self.grouped)
        read = (*self.grouped, *self.own)
        self.pick: Callable[[Mapping[str, str]], tuple[str, ...]] = (
            itemgetter(*read) if len(read) > 1
            else (lambda labels: tuple(labels[k] for k in read)))

    def key(self, labels: Mapping[str, str]) -> LabelKey:
        """The label group's key of labels with this layout."""
        return frozenset((k, labels[k]) for k in self.grouped)



_SetFiling = tuple["Group", tuple[tuple[str, str], ...], tuple[str, ...], str | None]
"""Nodes of one label set as ``ClusterInfo._set_filing`` files them: (group, the set's
per-node keys and values, the nodes' own keys, that key when it is the only per-node one)."""


def _set_own(filing: _SetFiling, own_map: Mapping[str, str],
             name: str) -> tuple[tuple[str, str], ...]:
    """The per-node labels of a node that names a label set filed as ``filing``, with its own
    labels ``own_map``: the set's per-node keys, then the node's (one copy each, ``_same``)."""
    _, fixed, own_keys, _ = filing
    return (*((k, _same(v, name)) for k, v in fixed),
            *((k, _same(own_map[k], name)) for k in own_keys))


def _same(value: str, name: str) -> str:
    """``name`` when ``value`` equals it (a hostname label is the node's name): one copy."""
    return name if value == name else value


def cpu_bucket(cpu_milli: int) -> int:
    """The cpu bucket of a free amount: its bit length, so higher buckets hold strictly more."""
    return min(cpu_milli.bit_length(), _CPU_BUCKETS - 1)


ClassMatch = tuple[str, int, ClassIndex]   # model, device memory MiB, the class's buckets
SearchOrder = tuple[int, TaskRequests, list[tuple[str, ClassIndex]], list[str]]


class Matches:
    """What a selector matches in one cluster: groups (CPU-only first) and their classes.

    ``per_node`` when the selector names a per-node key: every node must still be checked.
    Made once per cluster, selector and layout; written out rather than a frozen dataclass,
    whose generated ``__init__`` runs as interpreted Python even compiled (and the fields
    are ``Final``: read-only once compiled). Compared by identity.
    """

    __slots__ = ("_by_memory", "_models", "classes", "groups", "order", "per_node")

    def __init__(self, groups: tuple[Group, ...], classes: tuple[ClassMatch, ...],
                 per_node: bool) -> None:
        self.groups: Final = groups
        self.classes: Final = classes
        self.per_node: Final = per_node
        self._by_memory: Final[dict[int, tuple[tuple[str, ClassIndex], ...]]] = {}
        self._models: Final[dict[int, tuple[str, ...]]] = {}
        # the fit search's last class and model order: (cluster version, request object,
        # usable classes, models), kept by ``hub.fleet.fit`` (``_search_order``)
        self.order: SearchOrder | None = None

    def __repr__(self) -> str:
        return (f"Matches(groups={len(self.groups)}, classes={len(self.classes)}, "
                f"per_node={self.per_node})")

    def with_memory(self, memory_mib: int) -> tuple[tuple[str, ClassIndex], ...]:
        """(model, buckets) of the matched classes whose devices have ``memory_mib`` or more."""
        found = self._by_memory.get(memory_mib)
        if found is None:
            found = tuple((model, index) for model, memory, index in self.classes
                          if memory >= memory_mib)
            self._by_memory[memory_mib] = found
        return found

    def models(self, memory_mib: int = 0) -> tuple[str, ...]:
        """The models of the matched classes with ``memory_mib`` or more, sorted."""
        found = self._models.get(memory_mib)
        if found is None:
            found = self._models[memory_mib] = tuple(sorted(
                {model for model, _ in self.with_memory(memory_mib)}))
        return found


class ModelTotals:
    """Running sums for one capacity row (a device model, or ``none``).

    The ``off_*`` sums are the part on unschedulable nodes (cordoned or NotReady): shown in
    the total, never free, and left out of the headroom reserve's base.
    """

    __slots__ = ("cpu_total", "cpu_used", "devices", "mem_total", "mem_used", "nodes",
                 "off_cpu_total", "off_cpu_used", "off_devices", "off_mem_total", "off_mem_used",
                 "off_used_milli", "used_milli")

    def __init__(self) -> None:
        self.nodes = self.devices = self.used_milli = 0
        self.cpu_total = self.cpu_used = self.mem_total = self.mem_used = 0
        self.off_devices = self.off_used_milli = 0
        self.off_cpu_total = self.off_cpu_used = self.off_mem_total = self.off_mem_used = 0


class ClusterInfo:
    """One member cluster: settings, nodes, index and aggregates (read-only outside FleetView)."""

    def __init__(
        self, name: str, *, labels: Mapping[str, str], weight: int, headroom: float,
        state: ClusterState, cordoned: bool, ignore_keys: frozenset[str], memo: MatchMemo,
        on_change: Callable[[ClusterInfo], None],
    ) -> None:
        self.name = name
        self.labels: Mapping[str, str] = dict(labels)
        self.weight = weight
        self.headroom = headroom
        self.state = state
        self.cordoned = cordoned
        self.taints: tuple[Taint, ...] = ()    # set by FleetView (TaintToleration reads them)
        self._on_change = on_change
        self.version = next(_TICKS)
        self.layout_version = self.version
        self.settings_version = self.version   # moves when labels, weight...taints change
        self.capacity_version = self.version   # moves when a node's empty offer changes
        # Sums over schedulable nodes only: the headroom reserve is a fraction of these.
        self.cpu_total = self.cpu_used = self.memory_total = self.memory_used = 0
        self.schedulable_nodes = 0
        self._ignore = ignore_keys
        # the one copy of each per-node key (reports decoded from the wire bring their own)
        self._ignore_keys = {key: key for key in ignore_keys}
        self._memo = memo
        self._nodes: dict[str, NodeState] = {}
        self._node_group: dict[str, Group] = {}
        self._groups: dict[LabelKey, Group] = {}
        self._holds: dict[str, Hold] = {}
        self._totals: dict[str, ModelTotals] = {}
        self._matches: dict[str, tuple[int, Matches]] = {}
        self._sorted: tuple[int, list[Group]] = (-1, [])   # (layout_version, groups in order)
        # label key -> (layout_version, value -> places of its groups in ``_sorted``)
        self._places: dict[str, tuple[int, dict[str | None, list[int]]]] = {}
        self.model_versions: dict[str, int] = {}   # read-only outside: see model_version
        self._changes: list[tuple[int, str]] = []   # (version, node) of recent node changes
        self._changes_from = 0                      # ... complete after this version

    # -- reads -----------------------------------------------------------------------------

    @property
    def schedulable(self) -> bool:
        """Ready and not cordoned: open to new placements."""
        return self.state == _READY and not self.cordoned

    @property
    def node_count(self) -> int:
        """Nodes reported, schedulable or not."""
        return len(self._nodes)

    def node(self, name: str) -> NodeState | None:
        """A node's effective state (reported free minus hub holds), or None."""
        return self._nodes.get(name)

    def nodes(self) -> list[NodeState]:
        """Every node's effective state, sorted by name."""
        return [self._nodes[n] for n in sorted(self._nodes)]

    def device_milli(self, model: str) -> tuple[int, int]:
        """(total, used) milli-devices of one model on schedulable nodes; used counts member
        use and hub holds. Devices on cordoned or NotReady nodes are in neither."""
        t = self._totals.get(model)
        if t is None:
            return (0, 0)
        return ((t.devices - t.off_devices) * WHOLE, t.used_milli - t.off_used_milli)

    def model_version(self, model: str) -> int:
        """The tick of the last change to a node with devices of ``model`` (0: none yet).

        ``NO_MODEL`` stands for nodes without devices; a node with several models moves each.
        """
        return self.model_versions.get(model, 0)

    def in_plain_group(self, node: str) -> bool:
        """True when the node's label group holds no node with devices."""
        group = self._node_group.get(node)
        return group is not None and group.gpu_nodes == 0

    def nodes_changed_since(self, tick: int) -> list[str] | None:
        """Names of the nodes added, changed or removed since ``tick`` (newest first, may
        repeat), or None when that is further back than the recent changes kept."""
        if tick < self._changes_from:
            return None
        out: list[str] = []
        for version, node in reversed(self._changes):
            if version <= tick:
                break
            out.append(node)
        return out

    def held(self, node: str) -> bool:
        """True when hub reservations hold something on ``node``."""
        return node in self._holds

    def totals(self) -> dict[str, ModelTotals]:
        """Running sums per capacity row (device model or ``none``); do not modify."""
        return self._totals

    def matching(self, selector: Selector, key: str) -> Matches:
        """What ``selector`` (``key`` = its canonical text) matches here; cached per layout."""
        hit = self._matches.get(key)
        if hit is None or hit[0] != self.layout_version:
            if len(self._matches) >= _SELECTORS_KEPT:
                self._matches.clear()
            hit = (self.layout_version, self._match(selector, key))
            self._matches[key] = hit
        return hit[1]

    def has_match(self, selector: Selector, key: str) -> bool:
        """True when some node's labels match ``selector``."""
        found = self.matching(selector, key)
        if not found.per_node:
            return bool(found.groups)
        return any(selector.matches(n.labels) for g in found.groups for n in g.nodes.values())

    def free_for(self, selector: Selector, key: str, requests: TaskRequests) -> int:
        """Free milli-devices (GPU requests) or cpu millicores the selector's nodes still have."""
        found = self.matching(selector, key)
        if requests.gpu_milli == 0:
            return sum(g.free_cpu for g in found.groups)
        return sum(index.free_milli for _, memory, index in found.classes
                   if memory >= requests.gpu_memory_mib)

    # -- mutations (FleetView only) ----------------------------------------------------------

    def _configure(
        self, labels: Mapping[str, str], weight: int, headroom: float,
        state: ClusterState, cordoned: bool, taints: tuple[Taint, ...] | None = None,
    ) -> None:
        if taints is not None and tuple(taints) != self.taints:
            self.taints = tuple(taints)
            self.settings_version = next(_TICKS)
            self._bump()
        new = (dict(labels), weight, headroom, state, cordoned)
        if new != (self.labels, self.weight, self.headroom, self.state, self.cordoned):
            self.labels, self.weight, self.headroom, self.state, self.cordoned = new
            self.settings_version = next(_TICKS)
            self._bump()

    def _put(self, info: NodeReport) -> None:
        """Add or replace a node from a report."""
        old = self._nodes.get(info.name)
        if old is not None and old.reports(info):
            return
        new = NodeState(info, self._holds.get(info.name))
        self._file(new, old)
        if old is None or not old.offers_as(new):   # (read filed: labels of one group)
            self.capacity_version = next(_TICKS)
            self._on_change(self)

    def _put_all(self, infos: Mapping[str, NodeReport],
                 sets: Sequence[pb.LabelSet] | None = None) -> None:
        """File a whole inventory into a cluster that holds no node (an agent's first report):
        ``infos`` maps each node's name (as read once by the caller) to its report; with
        ``sets`` (even empty), the reports are the wire's ``pb.Node``s and may name them
        (``label-sets``, ``fuyao.labelsets``): a set is read once, not once per node.

        The view ends as ``_put`` node by node leaves it (same states, groups, buckets and
        their order, sums): the label group is looked up once per distinct label set, the
        sums are added once per cluster, and the versions move once, not once per node.
        """
        if self._nodes:
            raise ValueError(f"cluster {self.name}: _put_all needs a cluster without nodes")
        with collector_paused():
            self._file_all(infos, sets)

    def _file_all(self, infos: Mapping[str, NodeReport],
                  sets: Sequence[pb.LabelSet] | None = None) -> None:
        added: list[NodeState] = []
        filed: dict[Group, list[NodeState]] = {}   # each group's nodes, in report order
        created: list[LabelKey] = []   # groups made here: gone again if a report is refused
        try:
            if sets is not None:
                check_sets(sets)
            self._file_each(infos, filed, added, created, sets)
        except InvalidInput:
            # a report the wire's rules refuse (``fuyao.inventory.device_columns``): the
            # cluster had no node, and has none again
            self._nodes.clear()
            self._node_group.clear()
            for key in created:
                del self._groups[key]
            raise
        self._file_grouped(filed, added)

    def _file_each(self, infos: Mapping[str, NodeReport], filed: dict[Group, list[NodeState]],
                   added: list[NodeState], created: list[LabelKey],
                   sets: Sequence[pb.LabelSet] | None = None) -> None:
        """``_file_all``'s pass over the reports: each node's state, its label group (made
        if new, and noted in ``created``), in report order."""
        holds, ignore, keys, groups = self._holds, self._ignore, self._ignore_keys, self._groups
        nodes, node_group = self._nodes, self._node_group
        by_labels: dict[tuple[tuple[str, ...], object], Group] = {}
        layouts: dict[tuple[str, ...], _Layout] = {}
        by_set: dict[tuple[int, tuple[str, ...]], _SetFiling | None] = {}
        for name, info in infos.items():
            # the name as the caller read it (a wire message gives a new string at each
            # read), and the labels read once: the state is built with its filed labels
            labels = info.labels
            hold = holds.get(name) if holds else None
            number = 0 if sets is None else info.label_set   # type: ignore[attr-defined]
            filing = None
            if number:   # the node names a label set: its group is known by the set
                own_names = tuple(labels) if labels else ()
                seen_set = (number, own_names)
                if seen_set in by_set:
                    filing = by_set[seen_set]
                else:
                    filing = by_set[seen_set] = self._set_filing(
                        name, number, own_names, sets, groups, created)
                if filing is None:   # an own key that groups nodes: filed as a whole map
                    merged = dict(named_set(name, number, own_names, sets or ()))
                    merged.update(labels)
                    labels = merged
            if filing is not None:
                group, _, _, single = filing
                own: tuple[tuple[str, str], ...]
                if single is not None:   # most nodes: the hostname alone (inline: 1,000,000)
                    value = labels[single]
                    own = ((single, name if value == name else value),)   # as _same
                else:
                    own = _set_own(filing, labels, name)
                new = NodeState(info, hold, name, NodeLabels(group.labels, group.key, ignore, own))
            elif type(labels) is not NodeLabels:
                # a label set is known by its keys (in order) and the values of the grouped
                # ones, read in one call: no per-node copy of the labels is made (a dict, or
                # the wire's map as received)
                names = tuple(labels)
                layout = layouts.get(names)
                if layout is None:
                    layout = layouts[names] = _Layout(names, ignore, keys)
                values = layout.pick(labels)
                split = layout.split
                seen = (names, values[:split])   # the values themselves when none is own
                found = by_labels.get(seen)
                if found is None:
                    key = layout.key(labels)
                    found = groups.get(key)
                    if found is None:
                        found = groups[key] = Group(key)
                        created.append(key)
                    by_labels[seen] = found
                group = found
                own_keys = layout.own
                if not own_keys:
                    own = ()
                elif len(own_keys) == 1:
                    value = values[split]
                    own = ((own_keys[0], name if value == name else value),)   # as _same
                else:
                    own = tuple((k, _same(v, name))
                                for k, v in zip(own_keys, values[split:], strict=True))
                new = NodeState(info, hold, name, NodeLabels(group.labels, group.key, ignore, own))
            else:   # a refiled node's labels: as _file files them
                new = NodeState(info, hold, name, labels)
                group = self._group_for(new)
            into = filed.get(group)
            if into is None:
                into = filed[group] = []
            into.append(new)
            nodes[name] = new
            node_group[name] = group
            added.append(new)

    def _set_filing(self, name: str, number: int, own_names: tuple[str, ...],
                    sets: Sequence[pb.LabelSet] | None, groups: dict[LabelKey, Group],
                    created: list[LabelKey]) -> _SetFiling | None:
        """How nodes naming set ``number`` with own label keys ``own_names`` are filed: their
        group (made if new, noted in ``created``), the set's per-node keys with their values,
        and the own keys (interned); None when an own key is not a per-node key here (the
        node's group then depends on its value: it is filed as a whole map). Refuses what
        ``fuyao.labelsets.named_set`` refuses."""
        shared = named_set(name, number, own_names, sets or ())
        ignore, keys = self._ignore, self._ignore_keys
        if any(k not in ignore for k in own_names):
            return None
        whole = {key: shared[key] for key in shared}
        key = frozenset(kv for kv in whole.items() if kv[0] not in ignore)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key)
            created.append(key)
        fixed = tuple((keys[k], v) for k, v in whole.items() if k in ignore)
        own = tuple(keys[k] for k in own_names)
        return group, fixed, own, own[0] if len(own) == 1 and not fixed else None

    def _put_states(self, states: Iterable[NodeState]) -> None:
        """File node states another view built into a cluster that holds no node (a planning
        snapshot, ``hub.planning.snapshot``), as ``_put_all`` files the reports they came from.

        The states are shared, not copied (they are read-only once filed): each must carry
        its labels as filed by a cluster with the same per-node keys, or be new (its labels
        are then filed here). Only the containers (nodes, groups, buckets, sums) are new.
        """
        if self._nodes:
            raise ValueError(f"cluster {self.name}: _put_states needs a cluster without nodes")
        with collector_paused():
            groups, ignore = self._groups, self._ignore
            nodes, node_group = self._nodes, self._node_group
            added: list[NodeState] = []
            filed: dict[Group, list[NodeState]] = {}
            for state in states:
                labels = state.labels
                if type(labels) is NodeLabels and labels.ignored is ignore:
                    group = groups.get(labels.key)   # read, not refiled: the state is shared
                    if group is None:
                        group = groups[labels.key] = Group(labels.key)
                else:
                    group = self._group_for(state)
                into = filed.get(group)
                if into is None:
                    into = filed[group] = []
                into.append(state)
                nodes[state.name] = state
                node_group[state.name] = group
                added.append(state)
            self._file_grouped(filed, added)

    def _file_grouped(self, filed: Mapping[Group, list[NodeState]],
                      added: list[NodeState]) -> None:
        """The tail of a whole inventory's filing: the groups' buckets, the sums, versions."""
        # A group's buckets hold only its own nodes: filing group by group, each in report
        # order, fills every bucket in the order filing node by node does.
        for group, members in filed.items():
            group.add_all(members)
        if added:
            self.layout_version = self.capacity_version = next(_TICKS)
            self._account_all(added)
            self._bump()
            # Not logged node by node: a fit kept from before this inventory is searched
            # again (nodes_changed_since answers None for any earlier tick).
            self._changes.clear()
            self._changes_from = self.version

    def _drop(self, name: str) -> None:
        old = self._nodes.pop(name, None)
        if old is None:
            return
        group = self._node_group.pop(name)
        marks = self._layout_marks(group)
        group.remove(old)
        self._account(old, -1)
        self._settle(self._tidy(group, old), marks, group)
        self.capacity_version = next(_TICKS)
        self._bump()
        self._changed(name)

    def _hold(self, node: str, delta: Hold, sign: int) -> None:
        """Add or take away a reservation's hold on one node and refile the node."""
        hold = self._holds.setdefault(node, Hold())
        hold.add(delta, sign)
        if hold.empty:
            del self._holds[node]
        old = self._nodes.get(node)
        if old is not None:
            self._file(old.held(self._holds.get(node)), old)
        else:
            self._bump()

    def _bump(self) -> None:
        self.version = next(_TICKS)
        self._on_change(self)

    # -- internals ---------------------------------------------------------------------------

    def _file(self, new: NodeState, old: NodeState | None) -> None:
        """File a node, in place of ``old`` if given: nothing is deleted before it is back,
        so a node refiled in its own group leaves the layout as it was."""
        groups_before = len(self._groups)
        group = self._group_for(new)
        changed = len(self._groups) != groups_before
        old_group = group if old is None else self._node_group[old.name]
        marks = self._layout_marks(group, old_group)
        moved = old is not None and not self._reaccount(old, new)
        if old is not None:
            old_group.remove(old)
            if moved:
                self._account(old, -1)
        changed |= group.add(new)
        self._nodes[new.name] = new
        self._node_group[new.name] = group
        if old is None or moved:
            self._account(new, 1)
        if old is not None:
            changed |= self._tidy(old_group, old)
        self._settle(changed, marks, group, old_group)
        self._bump()
        self._changed(new.name)

    def _changed(self, node: str) -> None:
        """Log a node change at the current version (the last ``_CHANGES_KEPT`` or more)."""
        changes = self._changes
        changes.append((self.version, node))
        if len(changes) > 2 * _CHANGES_KEPT:
            self._changes_from = changes[_CHANGES_KEPT - 1][0]
            del changes[:_CHANGES_KEPT]

    def _group_for(self, new: NodeState) -> Group:
        """The label group of a node (made if new); the node's labels become the group's,
        shared, plus its own per-node keys."""
        labels = new.labels
        if isinstance(labels, NodeLabels) and labels.ignored is self._ignore:
            key = labels.key                     # a refile (hold): the labels did not change
        else:
            key = frozenset(kv for kv in labels.items() if kv[0] not in self._ignore)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = Group(key)
        if not isinstance(labels, NodeLabels) or labels.shared is not group.labels:
            # the group's labels, shared, plus the node's own (per-node keys)
            keys = self._ignore_keys
            new.labels = NodeLabels(group.labels, group.key, self._ignore, tuple(
                (keys[k], _same(v, new.name)) for k, v in labels.items() if k in keys))
        return group

    def _tidy(self, group: Group, old: NodeState) -> bool:
        """Drop what ``old`` left empty in its group (or the group); True if anything went."""
        changed = group.tidy(old.classes)
        if not group.nodes:
            del self._groups[group.key]
            changed = True
        return changed

    def _layout_marks(self, *groups: Group) -> tuple[bool, ...]:
        """The layout besides groups and classes: any node schedulable, groups with devices."""
        return (self.schedulable_nodes > 0, *(g.gpu_nodes > 0 for g in groups))

    def _settle(self, changed: bool, marks: tuple[bool, ...], *groups: Group) -> None:
        """Move ``layout_version`` if a change altered the layout."""
        if changed or marks != self._layout_marks(*groups):
            self.layout_version = next(_TICKS)

    def _account(self, node: NodeState, sign: int) -> None:
        alloc = node.alloc
        on = sign * node.schedulable      # cluster-wide sums: schedulable nodes only
        off = sign * (not node.schedulable)
        self.cpu_total += on * alloc.cpu_milli
        self.cpu_used += on * node.used_cpu
        self.memory_total += on * alloc.memory_mib
        self.memory_used += on * node.used_mem
        self.schedulable_nodes += sign * node.schedulable
        tick = next(_TICKS)
        for model in node.model_devices or (NO_MODEL,):
            self.model_versions[model] = tick
        row = self._row(node.primary)
        row.nodes += sign
        row.cpu_total += sign * alloc.cpu_milli
        row.cpu_used += sign * node.used_cpu
        row.mem_total += sign * alloc.memory_mib
        row.mem_used += sign * node.used_mem
        row.off_cpu_total += off * alloc.cpu_milli
        row.off_cpu_used += off * node.used_cpu
        row.off_mem_total += off * alloc.memory_mib
        row.off_mem_used += off * node.used_mem
        for model, count in node.model_devices.items():
            dev_row = self._row(model)
            dev_row.devices += sign * count
            dev_row.used_milli += sign * node.model_used[model]
            dev_row.off_devices += off * count
            dev_row.off_used_milli += off * node.model_used[model]
        for model in {node.primary, *node.model_devices}:
            totals = self._totals.get(model)
            if totals is not None and totals.nodes == 0 and totals.devices == 0:
                del self._totals[model]

    def _reaccount(self, old: NodeState, new: NodeState) -> bool:
        """``_account(old, -1)`` then ``_account(new, 1)`` in one pass, when that leaves the
        sums, the rows (and their order) and the model versions as the two calls would:
        the same primary model, device counts and schedulability, and no row the first call
        would empty (and delete, for the second to make again at the end). False, with
        nothing changed, otherwise. A refile of a node whose report or hold changed (four a
        placed task) is nearly always this case."""
        devices = new.model_devices
        if (old.primary != new.primary or old.schedulable != new.schedulable
                or (old.model_devices is not devices and old.model_devices != devices)):
            return False
        totals = self._totals
        row = totals.get(new.primary)
        if row is None or row.nodes < 2:
            return False
        for model, count in devices.items():
            if model != new.primary:
                dev_row = totals.get(model)
                if dev_row is None or (not dev_row.nodes and dev_row.devices <= count):
                    return False
        o_alloc, n_alloc = old.alloc, new.alloc
        d_cpu_total = n_alloc.cpu_milli - o_alloc.cpu_milli
        d_mem_total = n_alloc.memory_mib - o_alloc.memory_mib
        d_cpu_used = new.used_cpu - old.used_cpu
        d_mem_used = new.used_mem - old.used_mem
        if new.schedulable:
            self.cpu_total += d_cpu_total
            self.cpu_used += d_cpu_used
            self.memory_total += d_mem_total
            self.memory_used += d_mem_used
        else:
            row.off_cpu_total += d_cpu_total
            row.off_cpu_used += d_cpu_used
            row.off_mem_total += d_mem_total
            row.off_mem_used += d_mem_used
        next(_TICKS)              # the tick the first call took: the ticks stay the same
        tick = next(_TICKS)
        versions = self.model_versions
        for model in devices or (NO_MODEL,):
            versions[model] = tick
        row.cpu_total += d_cpu_total
        row.cpu_used += d_cpu_used
        row.mem_total += d_mem_total
        row.mem_used += d_mem_used
        o_used, n_used = old.model_used, new.model_used
        if o_used is not n_used:
            for model in devices:
                d_used = n_used[model] - o_used[model]
                dev_row = totals[model]
                dev_row.used_milli += d_used
                if not new.schedulable:
                    dev_row.off_used_milli += d_used
        return True

    def _account_all(self, added: list[NodeState]) -> None:
        """``_account(node, 1)`` for each of ``added`` in turn, summed before it is stored:
        the same totals, rows made in the same order, one tick for the models touched."""
        cpu_total = cpu_used = memory_total = memory_used = schedulable_nodes = 0
        touched: dict[int, Mapping[str, int]] = {}   # each node's (shared) model counts
        # ``_row`` inline (``rows.get(m) or row_for(m)``, a row is always true): one call
        # less per node and per model, a row still made on first use, in the same order
        rows, row_for = self._totals, self._row
        for node in added:
            alloc = node.alloc
            a_cpu, a_mem = alloc.cpu_milli, alloc.memory_mib
            u_cpu = a_cpu - node.cpu
            u_cpu = u_cpu if u_cpu > 0 else 0
            u_mem = a_mem - node.mem
            u_mem = u_mem if u_mem > 0 else 0
            model_devices = node.model_devices
            touched[id(model_devices)] = model_devices
            primary = node.primary
            row = rows.get(primary) or row_for(primary)
            row.nodes += 1
            row.cpu_total += a_cpu
            row.cpu_used += u_cpu
            row.mem_total += a_mem
            row.mem_used += u_mem
            if node.schedulable:
                cpu_total += a_cpu
                cpu_used += u_cpu
                memory_total += a_mem
                memory_used += u_mem
                schedulable_nodes += 1
                for model, count in model_devices.items():
                    dev_row = rows.get(model) or row_for(model)
                    dev_row.devices += count
                    dev_row.used_milli += node.model_used[model]
            else:
                row.off_cpu_total += a_cpu
                row.off_cpu_used += u_cpu
                row.off_mem_total += a_mem
                row.off_mem_used += u_mem
                for model, count in model_devices.items():
                    dev_row = rows.get(model) or row_for(model)
                    used = node.model_used[model]
                    dev_row.devices += count
                    dev_row.used_milli += used
                    dev_row.off_devices += count
                    dev_row.off_used_milli += used
        self.cpu_total += cpu_total
        self.cpu_used += cpu_used
        self.memory_total += memory_total
        self.memory_used += memory_used
        self.schedulable_nodes += schedulable_nodes
        tick = next(_TICKS)
        versions = self.model_versions
        for counts in touched.values():   # the models in the order first touched
            for model in counts or (NO_MODEL,):
                versions[model] = tick

    def _row(self, model: str) -> ModelTotals:
        row = self._totals.get(model)
        if row is None:
            row = self._totals[model] = ModelTotals()
        return row

    def _match(self, selector: Selector, key: str) -> Matches:
        groups = self._ordered_groups()
        per_node = False
        for ignored in self._ignore:   # a compiled loop: ``any`` of a generator is a call
            if ignored in key:
                per_node = True
                break
        if key and not per_node:
            groups = self._matching_groups(selector, key, groups)
        classes: list[ClassMatch] = []
        for group in groups:
            if group.classes:
                classes.extend(group.class_matches())
        return Matches(tuple(groups), tuple(classes), per_node)

    def _ordered_groups(self) -> list[Group]:
        """The groups, CPU-only first, then by labels; kept for the current layout (which
        moves whenever a group comes, goes or gains or loses its last device node)."""
        kept = self._sorted
        if kept[0] != self.layout_version:
            by_labels = sorted(self._groups.values(), key=_SORT_KEY)
            kept = self._sorted = (self.layout_version,
                                   [g for g in by_labels if g.gpu_nodes == 0]
                                   + [g for g in by_labels if g.gpu_nodes > 0])
        return kept[1]

    def _matching_groups(self, selector: Selector, key: str, groups: list[Group]) -> list[Group]:
        """The groups of ``groups`` (``_ordered_groups``) whose labels ``selector`` matches,
        in their order. The verdict is memoized fleet-wide by the labels' values at the keys
        it reads (``Selector.keys``): the same model or zone in another cluster's group -
        differing only in labels the selector does not read, its site for one - is not
        matched again. One key read (the common case): the value itself is the memo's key,
        asked once per value the cluster's groups have there; else the tuple of them, asked
        per group."""
        memo = self._memo
        verdicts = memo.verdicts(key)
        keys = selector.keys
        if len(keys) == 1:   # one verdict per value the groups have there, not per group
            picked: list[int] = []
            for value, places in self._places_by_value(keys[0]).items():
                verdict = verdicts.get(value)
                if verdict is None:
                    verdict = selector.matches(groups[places[0]].labels)
                    verdicts = memo.keep(key, value, verdict)
                if verdict:
                    picked.extend(places)
            picked.sort()
            return [groups[k] for k in picked]
        out: list[Group] = []
        for group in groups:
            labels = group.labels
            read = tuple([labels.get(k) for k in keys])
            verdict = verdicts.get(read)
            if verdict is None:
                verdict = selector.matches(labels)
                verdicts = memo.keep(key, read, verdict)
            if verdict:
                out.append(group)
        return out

    def _places_by_value(self, name: str) -> dict[str | None, list[int]]:
        """Value at label key ``name`` (None: the key is absent) -> the places, in order, of
        the groups with it in ``_ordered_groups``: kept for the layout, so the selectors
        that read one key (every model or zone selector) judge each value the cluster has
        once, however many groups have it."""
        kept = self._places.get(name)
        if kept is not None and kept[0] == self.layout_version:
            return kept[1]
        if len(self._places) >= _KEYS_KEPT:
            self._places.clear()
        places: dict[str | None, list[int]] = {}
        for k, group in enumerate(self._ordered_groups()):
            value = group.labels.get(name)
            found = places.get(value)
            if found is None:
                places[value] = [k]
            else:
                found.append(k)
        self._places[name] = (self.layout_version, places)
        return places
