"""The member's node scheduler: binds every replica of a task to a node, or none.

Shared ground (``fuyao/``) so one implementation serves both callers: the sim member
(``member_agent.backends.sim.backend``) and ``fuyaoctl simulate``'s engine
(``hub.planning.simulate``), which replays workloads through it offline.

Modelled on kube-scheduler: filter nodes (cordon, node selector, pod slots, cpu, memory, GPU
devices), score the survivors, pick the best with a deterministic tie-break by node name.
``best-fit`` scores like kube's ``MostAllocated`` (the node left fullest wins, which packs);
``spread`` like ``LeastAllocated``. A CPU-only replica (no GPU request) prefers nodes without
accelerators, whatever the policy, like a ``nvidia.com/gpu:PreferNoSchedule`` taint on GPU
nodes: it goes to a node with devices only when no accelerator-free node fits, and then the
policy's score picks among those. GPU requests (shares and whole cards) are scored as before.

``fgd`` is the FGD paper's policy (``fuyao.fragmentation``): the node - and, for a share,
the card - whose free GPUs stay most usable for the expected task shapes (the least growth
of fragmentation against a ``ShapeMix``), then best-fit, then the name; CPU-only replicas
keep the accelerator-free preference and then take the node where they fragment least
(counting the wholly free cards their cpu would leave unfed, ``ShapeMix.cost``).

Accounting is per GPU device, so ``DeviceInfo.free_milli`` stays truthful: a whole-card
request takes cards with ``free_milli == 1000``; a share (< 1000 milli) takes part of one
card, best-fit choosing the fullest card it still fits on.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from fuyao.errors import FuyaoError
from fuyao.fragmentation import DEFAULT_MIX, ShapeMix
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.selector import Selector
from fuyao.spec import TaskRequests

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_SELECTOR = "node(s) didn't match node selector"
REASON_PODS = "Too many pods"
REASON_CPU = "Insufficient cpu"
REASON_MEMORY = "Insufficient memory"
REASON_GPU = "Insufficient nvidia.com/gpu"
REASON_GPU_MEMORY = "node(s) had no GPU with enough memory"
WHOLE = 1000
_JUDGED_NODES = 100_000
_JUDGED_SHAPES = 256

Devices = tuple[tuple[str, int], ...]
Candidate = tuple[bool, float, float, str, Devices]   # accelerators spent, FGD, -score, name


class Policy(StrEnum):
    """How to score nodes that fit."""

    BEST_FIT = "best-fit"
    SPREAD = "spread"
    FGD = "fgd"


class NodeMatcher(Protocol):
    """A parsed node selector (``fuyao.selector.Selector`` satisfies it)."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True if a node with these labels is eligible."""
        ...


@dataclass(frozen=True, slots=True)
class Binding:
    """One replica bound to a node: what it takes there."""

    node: str
    cpu_milli: int
    memory_mib: int
    devices: tuple[tuple[str, int], ...] = ()  # (device id, milli)


@dataclass(frozen=True, slots=True)
class Unfit:
    """No placement: why, as a kube-style reason histogram."""

    reason: str


@dataclass(slots=True)
class _Device:
    id: str
    model: str
    memory_mib: int
    free_milli: int = WHOLE

    def info(self) -> DeviceInfo:
        return DeviceInfo(
            id=self.id,
            model=self.model,
            memory_mib=self.memory_mib,
            free_milli=self.free_milli,
            free_memory_mib=self.memory_mib * self.free_milli // WHOLE,
        )


@dataclass(slots=True)
class _Node:
    name: str
    labels: Mapping[str, str]
    allocatable: ResourceAmounts
    unschedulable: bool
    devices: list[_Device]
    used: ResourceAmounts = field(default_factory=ResourceAmounts)
    version: int = 0   # bumped on every bind and release (judgements are kept by it)

    @property
    def free(self) -> ResourceAmounts:
        return ResourceAmounts(
            cpu_milli=self.allocatable.cpu_milli - self.used.cpu_milli,
            memory_mib=self.allocatable.memory_mib - self.used.memory_mib,
            pods=self.allocatable.pods - self.used.pods,
        )

    def info(self) -> NodeInfo:
        return NodeInfo(
            name=self.name,
            labels=dict(self.labels),
            allocatable=self.allocatable,
            free=self.free,
            devices=tuple(d.info() for d in self.devices),
            unschedulable=self.unschedulable,
        )


class LocalScheduler:
    """Node state of one simulated member and the bind / release operations on it."""

    def __init__(self, nodes: Iterable[NodeInfo], policy: Policy = Policy.BEST_FIT,
                 mix: ShapeMix | None = None) -> None:
        self.policy = policy
        self.mix = mix or DEFAULT_MIX   # the expected task shapes (``fgd`` only)
        self._judged: dict[str, tuple[int, dict[int, str | Candidate]]] = {}
        self._keys: dict[tuple[str, TaskRequests], int] = {}
        self._next_key = itertools.count()
        self._nodes: dict[str, _Node] = {}
        for node in nodes:
            self._nodes[node.name] = _Node(
                name=node.name,
                labels=dict(node.labels),
                allocatable=node.allocatable,
                unschedulable=node.unschedulable,
                devices=[_Device(d.id, d.model, d.memory_mib, d.free_milli) for d in node.devices],
                used=ResourceAmounts(
                    cpu_milli=node.allocatable.cpu_milli - node.free.cpu_milli,
                    memory_mib=node.allocatable.memory_mib - node.free.memory_mib,
                    pods=node.allocatable.pods - node.free.pods,
                ),
            )

    def nodes(self) -> list[NodeInfo]:
        """Every node as it stands, sorted by name."""
        return [self._nodes[name].info() for name in sorted(self._nodes)]

    def node(self, name: str) -> NodeInfo:
        """One node as it stands."""
        return self._nodes[name].info()

    def schedule(self, req: TaskRequests, selector: NodeMatcher) -> tuple[Binding, ...] | Unfit:
        """Bind all ``req.replicas`` replicas (gang) and return the bindings, or bind none."""
        bound: list[Binding] = []
        for replica in range(req.replicas):
            outcome = self._bind_one(req, selector)
            if isinstance(outcome, Unfit):
                self.release(bound)
                if req.replicas > 1:
                    return Unfit(f"replica {replica + 1}/{req.replicas}: {outcome.reason}")
                return outcome
            bound.append(outcome)
        return tuple(bound)

    def release(self, bindings: Iterable[Binding]) -> None:
        """Give back what the bindings took (idempotence is the caller's job)."""
        for binding in bindings:
            node = self._nodes[binding.node]
            node.used = ResourceAmounts(
                cpu_milli=node.used.cpu_milli - binding.cpu_milli,
                memory_mib=node.used.memory_mib - binding.memory_mib,
                pods=node.used.pods - 1,
            )
            by_id = {d.id: d for d in node.devices}
            for device_id, milli in binding.devices:
                by_id[device_id].free_milli += milli
            node.version += 1

    def _bind_one(self, req: TaskRequests, selector: NodeMatcher) -> Binding | Unfit:
        reasons: Counter[str] = Counter()
        candidates: list[tuple[bool, float, float, str, Devices]] = []
        # A node's judgement of one (selector, request) is kept until the node changes;
        # only parsed selectors (whose text says what they match) are keyed.
        key = self._key(selector, req)
        judged = self._judged
        for node in self._nodes.values():
            kept = judged.get(node.name) if key is not None else None
            if kept is None or kept[0] != node.version:
                if len(judged) >= _JUDGED_NODES and key is not None:
                    judged.clear()
                kept = (node.version, {})
                if key is not None:
                    judged[node.name] = kept
            verdict = kept[1].get(key) if key is not None else None
            if verdict is None:
                verdict = self._judge(node, req, selector)
                if key is not None:
                    if len(kept[1]) >= _JUDGED_SHAPES:
                        kept[1].clear()
                    kept[1][key] = verdict
            if isinstance(verdict, str):
                reasons[verdict] += 1
            else:
                candidates.append(verdict)
        if not candidates:
            parts = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=_by_count))
            return Unfit(f"0/{len(self._nodes)} nodes are available: {parts}.")
        _, _, _, name, devices = min(candidates)
        node = self._nodes[name]
        node.used = ResourceAmounts(
            cpu_milli=node.used.cpu_milli + req.cpu_milli,
            memory_mib=node.used.memory_mib + req.memory_mib,
            pods=node.used.pods + 1,
        )
        by_id = {d.id: d for d in node.devices}
        for device_id, milli in devices:
            by_id[device_id].free_milli -= milli
        node.version += 1
        return Binding(name, req.cpu_milli, req.memory_mib, devices)

    def _key(self, selector: NodeMatcher, req: TaskRequests) -> int | None:
        """A small number for (selector text, request): what judgements are kept under."""
        if not isinstance(selector, Selector):
            return None
        pair = (str(selector), req)
        key = self._keys.get(pair)
        if key is None:
            if len(self._keys) >= _JUDGED_SHAPES:   # numbers are never reused
                self._keys.clear()
            key = self._keys[pair] = next(self._next_key)
        return key

    def _judge(self, node: _Node, req: TaskRequests, selector: NodeMatcher) -> str | Candidate:
        """A rejection reason, or the node's sort key as a candidate (lowest wins)."""
        verdict = self._filter(node, req, selector)
        if isinstance(verdict, str):
            return verdict
        # Accelerator nodes last for CPU-only work (a soft taint), then the policy.
        spends_accelerators = req.gpu_milli == 0 and not req.gpu_mem_mib and bool(node.devices)
        gradient = 0.0
        if self.policy is Policy.FGD and not req.gpu_mem_mib:   # memory shares: best-fit
            gradient, verdict = self._gradient(node, req, verdict)
            tie = gpu_used_after([d.free_milli for d in node.devices], req) if node.devices \
                else self._score(node, req)
            return (spends_accelerators, gradient, -tie, node.name, verdict)
        return (spends_accelerators, gradient, -self._score(node, req), node.name, verdict)

    def _filter(
        self, node: _Node, req: TaskRequests, selector: NodeMatcher
    ) -> str | tuple[tuple[str, int], ...]:
        """A rejection reason, or the devices the replica would take on this node."""
        if node.unschedulable:
            return REASON_UNSCHEDULABLE
        try:
            if not selector.matches(node.labels):
                return REASON_SELECTOR
        except FuyaoError as exc:
            return f"node(s) had labels the selector cannot compare ({exc.message})"
        free = node.free
        if free.pods < 1:
            return REASON_PODS
        if free.cpu_milli < req.cpu_milli:
            return REASON_CPU
        if free.memory_mib < req.memory_mib:
            return REASON_MEMORY
        return self._pick_devices(node, req)

    def _pick_devices(self, node: _Node, req: TaskRequests) -> str | tuple[tuple[str, int], ...]:
        if req.gpu_mem_mib:
            return self._pick_memory(node, req)
        if req.gpu_milli == 0:
            return ()
        big_enough = [d for d in node.devices if d.memory_mib >= req.gpu_memory_mib]
        if node.devices and not big_enough:
            return REASON_GPU_MEMORY
        if req.gpu_milli < WHOLE:
            fits = [d for d in big_enough if d.free_milli >= req.gpu_milli]
            if not fits:
                return REASON_GPU
            if self.policy is not Policy.SPREAD:
                chosen = min(fits, key=lambda d: (d.free_milli, d.id))
            else:
                chosen = min(fits, key=lambda d: (-d.free_milli, d.id))
            return ((chosen.id, req.gpu_milli),)
        whole = sorted((d for d in big_enough if d.free_milli == WHOLE), key=lambda d: d.id)
        wanted = req.gpu_milli // WHOLE
        if len(whole) < wanted:
            return REASON_GPU
        return tuple((d.id, WHOLE) for d in whole[:wanted])

    def _gradient(
        self, node: _Node, req: TaskRequests, devices: tuple[tuple[str, int], ...],
    ) -> tuple[float, tuple[tuple[str, int], ...]]:
        """FGD: how much the node's fragmentation grows, and the devices that grow it least."""
        free = node.free
        frees = [d.free_milli for d in node.devices]
        models = {d.model for d in node.devices}
        if not req.gpu_milli:
            before = self.mix.cost(free.cpu_milli, free.memory_mib, frees, models)
            after = self.mix.cost(free.cpu_milli - req.cpu_milli,
                                  free.memory_mib - req.memory_mib, frees, models)
            return after - before, devices
        eligible = [d.memory_mib >= req.gpu_memory_mib for d in node.devices]
        found = self.mix.best(free.cpu_milli, free.memory_mib, frees, eligible,
                              req.cpu_milli, req.memory_mib, req.gpu_milli, models)
        if found is None:   # the filter's devices fit; keep them (cannot happen in practice)
            return 0.0, devices
        delta, taken = found
        share = min(req.gpu_milli, WHOLE)
        return delta, tuple((node.devices[i].id, share) for i in taken)

    def _pick_memory(self, node: _Node, req: TaskRequests) -> str | tuple[tuple[str, int], ...]:
        """GPU memory sharing, per device: ``gpu_mem_mib`` of one device is the share
        ``ceil(1000 x mem / device memory)`` (at least the compute share asked for), the
        proportion this member reports free memory by; the tightest device that has it."""
        big_enough = [d for d in node.devices if d.memory_mib >= max(req.gpu_mem_mib,
                                                                        req.gpu_memory_mib)]
        if not big_enough:
            return REASON_GPU_MEMORY
        fits = [(d.free_milli, d.id, d, need) for d in big_enough
                if d.free_milli >= (need := memory_share(req.gpu_mem_mib, d.memory_mib,
                                                         req.gpu_milli))]
        if not fits:
            return REASON_GPU
        _, _, chosen, need = (min(fits) if self.policy is not Policy.SPREAD
                              else min(fits, key=lambda f: (-f[0], f[1])))
        return ((chosen.id, need),)

    def _score(self, node: _Node, req: TaskRequests) -> float:
        """Fraction of the node in use after placing the replica (mean over resources)."""
        used = used_after(node.allocatable, node.used.cpu_milli, node.used.memory_mib,
                          [d.free_milli for d in node.devices], req)
        return 1.0 - used if self.policy is Policy.SPREAD else used


def used_after(allocatable: ResourceAmounts, used_cpu: int, used_memory: int,
               frees: Sequence[int], req: TaskRequests) -> float:
    """Mean fraction of cpu, memory and (with devices) GPU in use once one replica of
    ``req`` is placed: best-fit's score (``spread`` takes its complement)."""
    fractions = [
        (used_cpu + req.cpu_milli) / allocatable.cpu_milli if allocatable.cpu_milli else 1.0,
        (used_memory + req.memory_mib) / allocatable.memory_mib
        if allocatable.memory_mib else 1.0,
    ]
    if frees:
        taken = sum(WHOLE - f for f in frees) + req.gpu_milli
        fractions.append(taken / (WHOLE * len(frees)))
    return sum(fractions) / len(fractions)


def gpu_used_after(frees: Sequence[int], req: TaskRequests) -> float:
    """The GPU fraction of a node in use once one replica of ``req`` is placed: the ``fgd``
    policy's tie-break among nodes whose fragmentation grows alike (member and hub)."""
    return (sum(WHOLE - f for f in frees) + req.gpu_milli) / (WHOLE * len(frees))


def memory_share(memory_mib: int, device_mib: int, compute_milli: int = 0) -> int:
    """The share of a ``device_mib`` device that gives ``memory_mib`` of its memory (at least
    ``compute_milli``), capped at a whole device: shares and memory go in proportion."""
    if device_mib <= 0:
        return WHOLE
    return min(WHOLE, max(compute_milli, -(-WHOLE * memory_mib // device_mib)))


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    reason, count = item
    return (-count, reason)
