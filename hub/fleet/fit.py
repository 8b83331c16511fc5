"""Fit search over one cluster's index, and the device plan behind a reservation.

``find_fit`` answers "which nodes of this cluster could take every replica of this task?"
for the NodeFit placement plugin (and the headroom plugin, which reuses its answer). It walks
only the buckets of ``hub.fleet.cluster`` that can hold a replica, checks the few candidate
nodes exactly (cpu, memory, pods, devices) and returns a ``Fit`` - one node per replica, all
replicas on devices of one model - or a ``Miss`` saying which requirement no node met.

``find_plain_fit`` is the same search for a CPU-only task restricted to nodes without
accelerators (the AcceleratorFit score plugin asks it when ``find_fit`` had to use a GPU
node).

``fit_models`` names the device models whose nodes a search's answer read, so a caller can
keep the answer while ``ClusterInfo.model_version`` of each (and ``layout_version``) stay put.
``certify`` and ``still_found`` go finer, node by node: a one-replica answer of the
``tightest`` search stays the answer while the chosen node is unchanged and no node that
changed since could now be chosen before it (``ClusterInfo.nodes_changed_since``).

``plan_holds`` is what ``FleetView.reserve`` uses to turn "these nodes" into exact holds
(which devices, how much of each), refusing with ``Conflict`` when the nodes no longer fit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.errors import Conflict
from fuyao.selector import Selector
from fuyao.spec import TaskRequests
from hub.fleet.cluster import ClassIndex, ClusterInfo, Matches, cpu_bucket
from hub.fleet.nodes import NO_MODEL, WHOLE, DeviceClass, Hold, NodeState


class MissKind(IntEnum):
    """The first requirement no node met, in the order the search checks them."""

    NO_NODES = 0      # the cluster has no schedulable node
    NO_MATCH = 1      # no node's labels match the selector
    GPU = 2           # no node has the devices (count, model, memory or share)
    CPU = 3           # ... and the cpu
    MEMORY = 4        # ... and the memory
    PODS = 5          # ... and a free pod slot
    GANG = 6          # some replicas fit, not all of them


class Fit:
    """Where a task's replicas would go: one node name per replica, devices of ``model``.

    Immutable (``Final`` attributes: read-only once compiled) and compared by value.
    Written out rather than a frozen dataclass: the dataclass's ``__init__`` runs as
    interpreted Python even in a compiled module, about ten times this one's cost."""

    __slots__ = ("model", "nodes")

    def __init__(self, nodes: tuple[str, ...], model: str | None) -> None:
        self.nodes: Final = nodes
        self.model: Final = model

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fit):
            return NotImplemented   # as the dataclass: the other side may answer
        return self.nodes == other.nodes and self.model == other.model

    def __hash__(self) -> int:
        return hash((self.nodes, self.model))

    def __repr__(self) -> str:
        return f"Fit(nodes={self.nodes!r}, model={self.model!r})"

    def __reduce__(self) -> tuple[type[Fit], tuple[tuple[str, ...], str | None]]:
        return (Fit, (self.nodes, self.model))   # pickle and copy, as the dataclass did


@dataclass(frozen=True, slots=True)
class Miss:
    """Why nothing fits; ``placed`` is how many replicas did fit (for ``GANG``)."""

    kind: MissKind
    placed: int = 0


Candidate = tuple[NodeState, int, bool]   # node, replicas its devices can take, check labels
_MISS_GPU: Final = Miss(MissKind.GPU)
_MISS_NO_NODES: Final = Miss(MissKind.NO_NODES)
_MISS_NO_MATCH: Final = Miss(MissKind.NO_MATCH)
_NO_ROOM: Final = float("inf")   # _by_room's -room of a model with no device counted
# Enum members read per cluster, taken once (from compiled code a member is a lookup
# through the enum's metaclass, a module name is not)
_NO_MATCH: Final = MissKind.NO_MATCH
_MISS_KINDS: Final = (MissKind.GPU, MissKind.CPU, MissKind.MEMORY, MissKind.PODS,
                      MissKind.GANG)   # by how far ``_assign`` got


def find_fit(
    cluster: ClusterInfo, selector: Selector, key: str, requests: TaskRequests,
    least_overqualified: bool = False,
) -> Fit | Miss:
    """Nodes for every replica, or the reason there are none (``key`` = selector text).

    ``least_overqualified``: take the lowest catalog rank among the models where some node
    fits (models outside the headroom reserve first, unranked after ranked), the tightest
    node of that model; False (``tightest``): the tightest node of any model.
    """
    if cluster.schedulable_nodes == 0:
        return _MISS_NO_NODES
    found = cluster.matching(selector, key)
    if not found.groups:
        return _MISS_NO_MATCH
    single = requests.replicas == 1 and not found.per_node
    if requests.gpu_milli == 0:
        quick = _first_cpu_fit(found, requests) if single else None
        return quick or _assign(_cpu_candidates(found, requests), requests, selector, None)
    usable, models = _search_order(cluster, found, requests)
    if least_overqualified:
        models = _by_rank(cluster, models, requests)
    if single:
        quick = (_lowest_rank_fit(usable, models, requests) if least_overqualified
                 else _tightest_fit(cluster, usable, models, requests))
        if quick is not None:
            return quick
    best = _MISS_GPU
    for model in models:
        candidates = _gpu_candidates(usable, model, requests, found.per_node)
        out = _assign(candidates, requests, selector, model)
        if isinstance(out, Fit):
            return out
        if (out.kind, out.placed) > (best.kind, best.placed):
            best = out
    return best


def find_plain_fit(
    cluster: ClusterInfo, selector: Selector, key: str, requests: TaskRequests,
) -> Fit | Miss:
    """``find_fit`` on nodes without accelerators only (a GPU request never fits there).

    Reads only the label groups that hold such a node - groups are accelerator-free unless
    their labels do not tell GPU nodes apart - and their cpu buckets that can hold a replica.
    ``Miss.placed`` says how many replicas did fit (for ``GANG``).
    """
    if requests.gpu_milli:
        return _MISS_GPU
    if cluster.schedulable_nodes == 0:
        return _MISS_NO_NODES
    found = cluster.matching(selector, key)
    groups = tuple(g for g in found.groups if g.gpu_nodes < len(g.nodes))
    if not groups:
        return _MISS_NO_MATCH
    plain = Matches(groups, (), found.per_node)
    candidates = (c for c in _cpu_candidates(plain, requests) if not c[0].classes)
    return _assign(candidates, requests, selector, None)


def fit_models(
    cluster: ClusterInfo, selector: Selector, key: str, requests: TaskRequests,
    found: Fit | Miss,
) -> tuple[str, ...]:
    """The models (``NO_MODEL``: nodes without devices) whose nodes ``found`` depends on.

    ``found`` is what ``find_fit`` just returned for this cluster. The answer stays right
    while the cluster's ``layout_version`` and the ``model_version`` of each model named
    here do not change: a GPU search reads only classes of matched groups with enough
    device memory (their nodes and per-model sums); a CPU search reads the groups without
    devices first, so a fit that ends in one of them read nothing else.
    """
    if isinstance(found, Miss) and found.kind <= _NO_MATCH:
        return ()   # no schedulable node, or no group matches: layout only
    matched = cluster.matching(selector, key)
    if requests.gpu_milli:
        return matched.models(requests.gpu_memory_mib)
    if isinstance(found, Fit) and cluster.in_plain_group(found.nodes[-1]):
        return (NO_MODEL,)
    return (NO_MODEL, *matched.models())


class Certificate:
    """What a one-replica answer of ``find_fit`` (``tightest``) rests on, to re-check it
    node by node (``still_found``) instead of searching again. Immutable, as ``Fit``."""

    __slots__ = ("cls", "group", "models", "node", "rank", "reserve")

    def __init__(self, node: str, cls: DeviceClass | None, group: int, rank: tuple[int, int],
                 models: tuple[str, ...] = (), reserve: tuple[bool, ...] = ()) -> None:
        self.node: Final = node            # the chosen node
        self.cls: Final = cls              # its device class (None: a CPU request)
        self.group: Final = group          # its label group's place among those matched
        self.rank: Final = rank   # GPU: (in reserve, tightness); CPU: (group, bucket order)
        self.models: Final = models        # GPU: the models in search order...
        self.reserve: Final = reserve      # ... and whether each would eat into the reserve

    def __repr__(self) -> str:
        return (f"Certificate(node={self.node!r}, cls={self.cls!r}, group={self.group!r}, "
                f"rank={self.rank!r}, models={self.models!r}, reserve={self.reserve!r})")

    def __reduce__(self) -> tuple[type[Certificate], tuple[object, ...]]:
        return (Certificate, (self.node, self.cls, self.group, self.rank, self.models,
                              self.reserve))


def certify(
    cluster: ClusterInfo, selector: Selector, key: str, requests: TaskRequests,
    found: Fit | Miss, least_overqualified: bool = False,
) -> Certificate | None:
    """The certificate of an answer ``find_fit`` just gave, or None when there is none to
    give (a miss, several replicas, a per-node selector, ``least-overqualified``, a share
    placed on a whole card)."""
    if (least_overqualified or not isinstance(found, Fit) or requests.replicas != 1
            or len(found.nodes) != 1):
        return None
    matched = cluster.matching(selector, key)
    node = cluster.node(found.nodes[0])
    if matched.per_node or node is None:
        return None
    group = _group_of(matched, node)
    if group is None:
        return None
    if requests.gpu_milli == 0:
        if found.model is not None:
            return None
        return Certificate(node.name, None, group,
                           (group, _bucket_order(cpu_bucket(node.cpu), requests)))
    slots = [(cls, slot) for cls, slot in node.classes.items()
             if cls[0] == found.model and cls[1] >= requests.gpu_memory_mib]
    if len(slots) != 1:
        return None
    cls, slot = slots[0]
    tight = _tightness(slot.full, slot.partial, requests)
    if tight is None or (requests.gpu_milli < WHOLE and tight >= WHOLE // 100):
        return None
    models, reserve = _model_order(cluster, matched, requests)
    if cls[0] not in models:
        return None
    return Certificate(node.name, cls, group, (int(reserve[models.index(cls[0])]), tight),
                       models, reserve)


def still_found(
    cluster: ClusterInfo, selector: Selector, key: str, requests: TaskRequests,
    cert: Certificate, changed: Sequence[str],
) -> bool:
    """True when ``find_fit`` would still answer the certified node, given that only the
    nodes ``changed`` have changed since (and not the cluster's layout): the node is not
    among them, none of them could now be chosen before it, and - for a GPU request - the
    models' search order and reserve flags are as they were."""
    if cert.node in changed:
        return False
    matched = cluster.matching(selector, key)
    cpu, mem = requests.cpu_milli, requests.memory_mib
    models, reserve = cert.models, cert.reserve
    if cert.cls is not None and not _order_holds(cluster, cert, requests):
        return False
    memory = requests.gpu_memory_mib
    for name in set(changed):
        node = cluster.node(name)
        if (node is None or not node.schedulable or node.cpu < cpu or node.mem < mem
                or node.pods <= 0):
            continue
        if cert.cls is None:   # CPU: groups in order, then buckets; in a bucket, filing order
            group = _group_of(matched, node)
            if group is not None and (
                    group, _bucket_order(cpu_bucket(node.cpu), requests)) < cert.rank:
                return False
            continue
        for cls, slot in node.classes.items():
            if cls[1] < memory:
                continue
            tight = _tightness(slot.full, slot.partial, requests)
            if tight is None:
                continue
            if cls[0] not in models:   # a model that had no room joins the search
                if _group_of(matched, node) is not None:
                    return False
                continue
            rank = (int(reserve[models.index(cls[0])]), tight)
            if rank > cert.rank:
                continue
            group = _group_of(matched, node)
            if group is not None and (rank < cert.rank or cls != cert.cls
                                      or group != cert.group):
                return False   # tighter, or as tight in a class index searched maybe before
    return True


def _group_of(matched: Matches, node: NodeState) -> int | None:
    """The place of the node's label group among the matched ones (None: not matched)."""
    labels = node.labels
    group_key = getattr(labels, "key", None)
    for k, group in enumerate(matched.groups):
        if group.key == group_key if group_key is not None else node.name in group.nodes:
            return k
    return None


def _order_holds(cluster: ClusterInfo, cert: Certificate, requests: TaskRequests) -> bool:
    """True when the certificate's models still come in its order with its reserve flags
    (a model that left the search cannot change the answer; one that joins is a changed
    node's, which ``still_found`` checks)."""
    gpu = requests.gpu_milli
    need = gpu * requests.replicas
    headroom = cluster.headroom - 1e-9
    last: tuple[float, str] | None = None
    models, flags = cert.models, cert.reserve   # of one length (``certify``)
    several = len(models) > 1
    for k in range(len(models)):   # a compiled loop (a zip is a call)
        model, flag = models[k], flags[k]
        total, used = cluster.device_milli(model)
        if total > 0 and ((total - used - gpu) / total < headroom) != flag:
            return False
        if total <= 0 and flag:
            return False
        if several:
            place = (-(total - used - need) / total if total else float("inf"), model)
            if last is not None and place < last:
                return False
            last = place
    return True


def _model_order(
    cluster: ClusterInfo, matched: Matches, requests: TaskRequests,
) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The models ``_tightest_fit`` walks, in order, and whether each is in its reserve."""
    models = tuple(_search_order(cluster, matched, requests)[1])
    return models, tuple(_in_reserve(cluster, m, requests.gpu_milli) for m in models)


def _bucket_order(bucket: int, requests: TaskRequests) -> int:
    """Where a cpu bucket comes in ``_first_cpu_fit``'s walk (surely-enough ones first)."""
    first = cpu_bucket(requests.cpu_milli)
    return bucket if bucket > first else 1 << 10


def _tightness(full: int, partial: int, requests: TaskRequests) -> int | None:
    """How tight a device slot is for one replica, as ``_first_card_fit`` /
    ``_first_share_fit`` rank it (None: it cannot take one)."""
    gpu = requests.gpu_milli
    if gpu >= WHOLE:
        cards = gpu // WHOLE
        return full - cards if full >= cards else None
    if partial >= gpu:
        return partial // 100
    return WHOLE // 100 if full >= 1 else None


def _search_order(
    cluster: ClusterInfo, found: Matches, requests: TaskRequests,
) -> tuple[list[tuple[str, ClassIndex]], list[str]]:
    """``_usable`` and ``_by_room`` of them: the classes and the models a GPU search walks.
    Kept on ``found`` (the cluster's matches for the selector) for the cluster's version
    and this request object, so ``certify``, asking right after ``find_fit`` for the same
    request, reads them instead of walking the classes again. Not to be modified."""
    kept = found.order
    version = cluster.version
    if kept is not None and kept[0] == version and kept[1] is requests:
        return kept[2], kept[3]
    usable = _usable(found, requests)
    models = _by_room(cluster, usable, requests)
    found.order = (version, requests, usable, models)
    return usable, models


def _usable(found: Matches, requests: TaskRequests) -> list[tuple[str, ClassIndex]]:
    """Matched classes with the device memory where some node could give one replica."""
    gpu = requests.gpu_milli
    classes = found.with_memory(requests.gpu_memory_mib)
    if gpu >= WHOLE:
        return [c for c in classes if len(c[1].full) > gpu // WHOLE]
    return [c for c in classes if c[1].can_host(gpu)]


def _by_room(
    cluster: ClusterInfo, usable: Sequence[tuple[str, ClassIndex]], requests: TaskRequests,
) -> list[str]:
    """Models some matching node could give one replica, most room left (after) first."""
    if not usable:
        return []
    first = usable[0][0]
    for model, _ in usable:
        if model != first:
            break
    else:
        return [first]
    need = requests.gpu_milli * requests.replicas
    # (-room, model) for each, sorted as tuples: no key function called per model (from
    # compiled code a closure is a call through the interpreter's generic protocol)
    ranked: list[tuple[float, str]] = []
    for model in {model for model, _ in usable}:
        total, used = cluster.device_milli(model)
        ranked.append((-((total - used - need) / total) if total else _NO_ROOM, model))
    ranked.sort()
    return [model for _, model in ranked]


def _by_rank(cluster: ClusterInfo, models: list[str], requests: TaskRequests) -> list[str]:
    """``models`` outside the headroom reserve first, then by catalog rank (unranked last);
    ties keep ``models``' order."""
    need = requests.gpu_milli * requests.replicas
    ranked: list[tuple[bool, bool, int, int, str]] = []   # the place in ``models`` breaks ties
    for place, model in enumerate(models):
        rank = DEFAULT_CATALOG.rank(model)
        ranked.append((_in_reserve(cluster, model, need), rank is None, rank or 0, place, model))
    ranked.sort()
    return [found[4] for found in ranked]


def _lowest_rank_fit(
    usable: Sequence[tuple[str, ClassIndex]], models: Sequence[str], requests: TaskRequests,
) -> Fit | None:
    """One replica on the tightest node of the first model in ``models`` where one fits."""
    for model in models:
        found = (_first_card_fit(usable, model, requests) if requests.gpu_milli >= WHOLE
                 else _first_share_fit(usable, model, requests))
        if found is not None:
            return found[1]
    return None


def _first_cpu_fit(found: Matches, requests: TaskRequests) -> Fit | None:
    """``_assign(_cpu_candidates(...))`` for one replica on success, without its bookkeeping."""
    cpu, mem = requests.cpu_milli, requests.memory_mib
    first = cpu_bucket(cpu)
    for group in found.groups:
        buckets = group.cpu_buckets
        for bucket in (*range(first + 1, group.cpu_top + 1), first):
            for node in buckets[bucket].values():
                if node.cpu >= cpu and node.mem >= mem and node.pods > 0:
                    return Fit((node.name,), None)
    return None


def _tightest_fit(
    cluster: ClusterInfo, usable: Sequence[tuple[str, ClassIndex]], models: Sequence[str],
    requests: TaskRequests,
) -> Fit | None:
    """One replica on the node, of any usable model, that leaves the least of its devices
    free (best fit, as member schedulers bind), among the models whose headroom reserve the
    replica leaves intact if there are any; ties keep ``models``' order. Choosing among
    models this way, not by most room, keeps the model the hub pins where the member would
    have packed it (measured on the trace: ~2 points of GPU allocation)."""
    best: tuple[tuple[bool, int], Fit] | None = None     # ((in reserve, tightness), fit)
    for model in models:
        found = (_first_card_fit(usable, model, requests) if requests.gpu_milli >= WHOLE
                 else _first_share_fit(usable, model, requests))
        if found is None:
            continue
        key = (_in_reserve(cluster, model, requests.gpu_milli), found[0])
        if best is None or key < best[0]:
            best = (key, found[1])
            if key == (False, 0) and requests.gpu_milli >= WHOLE:
                break                              # a node left with no free card
    return None if best is None else best[1]


def _in_reserve(cluster: ClusterInfo, model: str, need: int) -> bool:
    """True if ``need`` more milli-devices of ``model`` would eat into the headroom reserve
    (the Headroom filter's device rule)."""
    total, used = cluster.device_milli(model)
    return total > 0 and (total - used - need) / total < cluster.headroom - 1e-9


def _first_card_fit(
    usable: Sequence[tuple[str, ClassIndex]], model: str, requests: TaskRequests,
) -> tuple[int, Fit] | None:
    """The tightest node of ``model`` for one whole-card replica, with the milli-devices it
    leaves free; ``_assign(_gpu_candidates(...))`` on success, faster."""
    cpu, mem, cards = requests.cpu_milli, requests.memory_mib, requests.gpu_milli // WHOLE
    best: tuple[int, Fit] | None = None
    for cls_model, index in usable:           # one class per device memory size of the model
        if cls_model != model:
            continue
        full = index.full
        top = len(full) if best is None else min(len(full), best[0] + cards)
        found = next(((count - cards, Fit((node.name,), model))
                      for count in range(cards, top) for node in full[count].values()
                      if node.cpu >= cpu and node.mem >= mem and node.pods > 0), None)
        if found is not None:
            best = found
    return best


def _first_share_fit(
    usable: Sequence[tuple[str, ClassIndex]], model: str, requests: TaskRequests,
) -> tuple[int, Fit] | None:
    """The tightest node of ``model`` for one shared-card replica (a partly used card first),
    with how tight it is: the 100-milli bucket of the card's free share (10 for a whole free
    card), the same for every node of a bucket; ``_assign(...)`` on success, faster."""
    cpu, mem, share = requests.cpu_milli, requests.memory_mib, requests.gpu_milli
    best: tuple[int, Fit] | None = None
    for cls_model, index in usable:           # one class per device memory size of the model
        if cls_model != model:
            continue
        cls = index.cls
        top = len(index.partial) if best is None else min(len(index.partial), best[0])
        found = next(((bucket, Fit((node.name,), model))
                      for bucket in range(share // 100, top)
                      for node in index.partial[bucket].values()
                      if node.classes[cls].partial >= share and node.cpu >= cpu
                      and node.mem >= mem and node.pods > 0), None)
        if found is None and best is None:
            full = index.full
            found = next(((WHOLE // 100, Fit((node.name,), model))
                          for count in range(1, len(full)) for node in full[count].values()
                          if node.cpu >= cpu and node.mem >= mem and node.pods > 0), None)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return best


def _cpu_candidates(found: Matches, requests: TaskRequests) -> Iterator[Candidate]:
    """Schedulable nodes that may have the cpu: surely-enough buckets first, then the edge one."""
    first = cpu_bucket(requests.cpu_milli)
    for group in found.groups:
        buckets = group.cpu_buckets
        for bucket in (*range(first + 1, group.cpu_top + 1), first):
            for node in buckets[bucket].values():
                yield node, requests.replicas, found.per_node


def _gpu_candidates(
    usable: Sequence[tuple[str, ClassIndex]], model: str, requests: TaskRequests, per_node: bool,
) -> Iterator[Candidate]:
    """Nodes with devices of ``model`` for one replica, tightest fit first."""
    for cls_model, index in usable:
        if cls_model != model:
            continue
        if requests.gpu_milli < WHOLE:
            yield from _share_candidates(index, requests, per_node)
            continue
        cards = requests.gpu_milli // WHOLE
        for count in range(cards, len(index.full)):
            for node in index.full[count].values():
                yield node, count // cards, per_node


def _share_candidates(
    index: ClassIndex, requests: TaskRequests, per_node: bool,
) -> Iterator[Candidate]:
    """Nodes that can give a share: partly used devices first (packing), then whole ones."""
    share = requests.gpu_milli
    cls = index.cls
    seen: set[str] | None = set() if requests.replicas > 1 else None
    for bucket in range(share // 100, len(index.partial)):
        for node in index.partial[bucket].values():
            slot = node.classes[cls]
            if slot.partial < share:
                continue
            if seen is not None:
                seen.add(node.name)
            yield node, slot.share_capacity(share), per_node
    for count in range(1, len(index.full)):
        for node in index.full[count].values():
            if seen is None or node.name not in seen:
                yield node, node.classes[cls].share_capacity(share), per_node


def _assign(
    candidates: Iterator[Candidate], requests: TaskRequests, selector: Selector,
    model: str | None,
) -> Fit | Miss:
    """Give replicas to candidates in order until all are placed; else say what was missing."""
    cpu, mem, replicas = requests.cpu_milli, requests.memory_mib, requests.replicas
    placed: list[str] = []
    taken: dict[str, int] = {}
    reached = 0   # 1: devices ok, 2: + cpu, 3: + memory, 4: + pod slot
    for node, device_cap, per_node in candidates:
        if per_node and not selector.matches(node.labels):
            continue
        already = taken.get(node.name, 0)
        free_cpu = node.cpu - already * cpu
        free_mem = node.mem - already * mem
        free_pods = node.pods - already
        stage = 1 if free_cpu < cpu else 2 if free_mem < mem else 3 if free_pods < 1 else 4
        reached = max(reached, stage)
        if stage < 4:
            continue
        fits = min(
            device_cap, free_pods, replicas - len(placed),
            free_cpu // cpu if cpu else replicas, free_mem // mem if mem else replicas,
        )
        placed.extend([node.name] * fits)
        if len(placed) >= replicas:
            return Fit(tuple(placed), model)
        taken[node.name] = already + fits
    kind = _MISS_KINDS[reached] if reached or model else _MISS_KINDS[1]
    return Miss(kind, len(placed))


_NO_HOLD: Final = Hold()   # read only


def plan_holds(
    cluster: ClusterInfo, requests: TaskRequests, nodes: Sequence[str], model: str | None,
) -> dict[str, Hold]:
    """What each node must hold for one replica per entry of ``nodes``; ``Conflict`` if not."""
    plan: dict[str, Hold] = {}
    for name in nodes:
        state = cluster.node(name)
        if state is None:
            raise Conflict(f"cluster {cluster.name} has no node {name!r}")
        hold = plan.setdefault(name, Hold())
        if not _add_replica(state, hold, requests, model):
            raise Conflict(
                f"node {name} of cluster {cluster.name} no longer has room for "
                f"{nodes.count(name)} replica(s)"
            )
    return plan


def room_besides_devices(
    state: NodeState, requests: TaskRequests, hold: Hold = _NO_HOLD,
) -> bool:
    """Schedulable, with the cpu, memory and a pod slot for one more replica after ``hold``:
    ``plan_holds``'s check but for the devices (``devices_for_one``)."""
    return (state.schedulable and state.cpu - hold.cpu_milli >= requests.cpu_milli
            and state.mem - hold.memory_mib >= requests.memory_mib
            and state.pods - hold.pods >= 1)


def devices_for_one(state: NodeState, requests: TaskRequests) -> bool:
    """True when the node's devices (any model) could give one replica: the device part of
    ``plan_holds``'s check for one replica (``_pick_devices`` finds some), read from each
    class's counts - wholly free cards, the largest partly free share."""
    want = requests.gpu_milli
    if want == 0:
        return True
    for (_, memory), slot in state.classes.items():
        if memory < requests.gpu_memory_mib:
            continue
        if slot.full >= want // WHOLE if want >= WHOLE else slot.full or slot.partial >= want:
            return True
    return False


def _add_replica(state: NodeState, hold: Hold, requests: TaskRequests, model: str | None) -> bool:
    if not room_besides_devices(state, requests, hold):
        return False
    devices = _pick_devices(state, hold, requests, model)
    if devices is None:
        return False
    hold.cpu_milli += requests.cpu_milli
    hold.memory_mib += requests.memory_mib
    hold.pods += 1
    for dev, milli in devices:
        hold.devices[dev] = hold.devices.get(dev, 0) + milli
    return True


def _pick_devices(
    state: NodeState, hold: Hold, requests: TaskRequests, model: str | None,
) -> list[tuple[str, int]] | None:
    """Devices for one replica: whole free cards in order, or the tightest share that fits."""
    want = requests.gpu_milli
    if want == 0:
        return []
    held = hold.devices   # what this plan already took on the node (several replicas)
    by_class = zip(state.classes.items(), state.class_ids(), strict=True)
    for ((cls_model, memory), slot), ids in sorted(by_class, key=lambda entry: entry[0][0]):
        if (model is not None and cls_model != model) or memory < requests.gpu_memory_mib:
            continue
        # ids spelled out only for the cards taken (``NumberedIds`` makes each on reading)
        frees = ([f - held.get(d, 0) for d, f in zip(ids, slot.frees, strict=True)]
                 if held else slot.frees)
        if want >= WHOLE:
            whole = [i for i, f in enumerate(frees) if f >= WHOLE][: want // WHOLE]
            if len(whole) == want // WHOLE:
                return [(ids[i], WHOLE) for i in whole]
        else:
            fitting = [(f, i) for i, f in enumerate(frees) if f >= want]
            if fitting:
                return [(ids[min(fitting)[1]], want)]
    return None
