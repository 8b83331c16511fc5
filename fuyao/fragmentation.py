"""GPU fragmentation against a task-shape mix (the FGD paper's measure), and its gradient.

"Beware of Fragmentation" (Weng et al., ATC'23) calls a node's free GPU capacity fragmented
for a task shape when a task of that shape cannot use it: all of it when the node lacks the
cpu or memory the shape needs; for a share of one card, the cards with less free than the
share; for whole cards, the partly used cards (or everything when too few cards are wholly
free). A node's fragmentation is the popularity-weighted sum over the expected shapes, and
FGD places each task where that sum grows least (the fragmentation *gradient*).

One addition to the paper's measure, in the gradient only (``ShapeMix.cost``; ``fragment``
stays the paper's): a whole-card shape can use only as many wholly free cards as the node's
free cpu can feed replicas of it (``cpu / shape cpu x cards``, fractional), and the cards
beyond that count as fragmented with weight ``starved_weight`` (0.5, the measured best, by
default; 0 is the paper's FGD: ``trace_quality.py --starved-weight 0``). Nodes of the GPU
models that model-constrained tasks name (``spared_models``) are judged without the term:
it would push work onto the cpu-rich cards those tasks need, or away from the cards they
compete for (on the model-constrained ``gpuspec10`` list it drained V100, P100 and G3 nodes
and lost 0.3 points). A live member's ``DEFAULT_MIX`` keeps the paper's gradient: it knows
neither the workload's shapes nor which models constrained tasks need.
The paper sees cpu only once it falls below one replica's need, so it let
cpu-heavy tasks drain the cpu of nodes whose cpu per card just matches the whole-card tasks
(the trace's 8-card G2 nodes: 12 cores a card, one-card tasks 11.4) while cpu-rich nodes
(T4: 52 cores a card) stayed idle in cpu; the term steers them apart. Measured on the openb
trace in ``docs/benchmarks.md`` (about +0.2 points; weights 0.25-0.75 and the same rule for
shares or for memory were measured too, and lost to 0.5).

The cpu term has a second part, the cpu balance (``unfed``, weighted ``BALANCE_FACTOR`` x
``starved_weight``): the node's free GPU beyond what its free cpu can serve at the cpu per
GPU the workload's GPU tasks ask for (``cpu_per_gpu``, about 11.3 cores on the openb
lists), shares and partly used cards included. It leaves a node's cpu and GPU running
out together: a cpu-heavy task pays on a node poor in cpu (the trace's 8-core-a-card
V100 and P100 nodes), a cpu-light one (the 810-milli shares, 3.2 cores) is drawn there.
Without it, GPU on nodes with no cpu left was the second largest waste at the end of a
default-list replay (54 GPUs of 290 free; the 190-milli leftovers of the 810-milli shares
are the largest, 189), and it gained 0.5 points there (docs/benchmarks.md, fifth pass).
Unlike the whole-card part it is not spared on the models constrained tasks name: it
balances cpu within every node rather than pushing unconstrained work between models,
and on the model-constrained ``gpuspec10`` list it gained 0.7 points unspared.

Pinned tasks (``pinned_share``, ``scarcity``): FGD judges one node at a time, so nothing
keeps the small pools of a model that tasks are pinned to (a trace's ``gpu_spec``) for
them: on the model-constrained ``gpuspec10`` list the gradient filled the 2-card T4 nodes
with unpinned tasks first (they spare the 8-card nodes multi-card shapes need), and from
22% arrived on every T4-pinned task was refused. A workload mix knows each model's share
of the GPU demand pinned to it (``pinned_shares``); the hub's ``Fragmentation`` plugin
holds that share of a cluster's free GPU for the pinned tasks and charges a task free to
run elsewhere, on top of the gradient, for the shortfall below the hold its replica
causes (``scarcity``: 0 while the model has room, nearly the whole replica once it has
not). Tasks naming a model are never charged. ``DEFAULT_MIX`` pins nothing, so a live
hub is unchanged. Pinning the shapes themselves to their models (a shape strands all
the free GPU of a node it cannot run on, the paper's rule) was measured too and lost
(docs/benchmarks.md).

Shared ground: the member's ``fgd`` node policy (``fuyao.nodescheduler``) and the hub's
``Fragmentation`` placement plugin (``hub.placement.plugins.fragmentation``) both call
``ShapeMix.best``, so the cluster the hub picks holds the node the member will bind. The
capacity view (``hub.planning.fragmentation``: per model, with selectors, device memory and
the hub's own fit check) and ``ShapeMix`` share the per-device rule, ``too_small``; the
simulator reports ``ShapeMix.fragment`` as the fragmentation of what is left free.

Cost: a node's fragmentation depends on its memory only through "at least shape s's demand",
so values are memoized by (free cpu, memory rank, sorted free shares); a fleet has few
distinct such states, and a decision is mostly dictionary look-ups.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fuyao.errors import InvalidInput
from fuyao.labels import GPU_MODEL
from fuyao.selector import Selector
from fuyao.spec import TaskRequests

WHOLE = 1000
_MEMO_LIMIT = 200_000
STARVED_WEIGHT = 0.5
MAX_STARVED_WEIGHT = 10.0   # a whole starved card weighs at most this many fragmented ones
"""How much a wholly free card the node's cpu cannot feed counts as fragmented (see above):
0.5 wins or ties on every openb list and the generated sharing mixes once the models
constrained tasks name are spared (docs/benchmarks.md); 0 is the paper's gradient."""
BALANCE_FACTOR = 16.0
"""The cpu balance's weight relative to ``starved_weight`` (8 at the default 0.5): free GPU
the node's cpu cannot serve at the workload's cpu per GPU. Measured on the default list,
K=4 seed 42: factors 0.5/1/2/4/8/16/64 gave 95.40/95.53/95.69/95.82/95.86/95.89/95.88 %
(no balance: 95.34); it levels off from 16 (docs/benchmarks.md, fifth pass)."""

FreeState = tuple[int, int, tuple[int, ...]]   # free cpu milli, memory rank, sorted free shares


@dataclass(frozen=True, slots=True)
class Shape:
    """One expected task shape: per-replica cpu and memory, GPU per card, cards, popularity."""

    cpu_milli: int
    memory_mib: int
    gpu_milli: int            # < 1000: a share of one card; 1000: whole cards
    cards: int = 1
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.weight < 0:
            raise InvalidInput(f"task shape {self}: amounts and weight must be >= 0")
        if not 0 < self.gpu_milli <= WHOLE or self.cards < 1:
            raise InvalidInput(f"task shape {self}: needs 1..1000 milli-GPU and >= 1 card")
        if self.cards > 1 and self.gpu_milli != WHOLE:
            raise InvalidInput(f"task shape {self}: only one card can be shared")


class ShapeMix:
    """Expected GPU task shapes with normalized popularity; memoizes node fragmentation.

    CPU-only shapes are left out: every node's free GPUs are equally useless to them, a
    constant that never changes which node is best.
    """

    def __init__(self, shapes: Iterable[Shape], starved_weight: float = STARVED_WEIGHT,
                 spared_models: Iterable[str] = (),
                 pinned_share: Mapping[str, float] | None = None) -> None:
        if not 0 <= starved_weight <= MAX_STARVED_WEIGHT:    # NaN fails both comparisons
            raise InvalidInput(f"task shape mix: starved weight {starved_weight} must be "
                               f"from 0 to {MAX_STARVED_WEIGHT}")
        if any(not 0 <= v <= 1 for v in (pinned_share or {}).values()):
            raise InvalidInput(f"task shape mix: pinned shares {pinned_share} must be "
                               "from 0 to 1")
        self.starved_weight = starved_weight
        self.spared_models = frozenset(spared_models)
        self.pinned_share = {m: v for m, v in (pinned_share or {}).items() if v > 0}
        kept = [s for s in shapes if s.weight > 0]
        total = sum(s.weight for s in kept)
        if not kept or total <= 0:
            raise InvalidInput("task shape mix: needs at least one GPU shape with weight > 0")
        self.shapes = tuple(
            Shape(s.cpu_milli, s.memory_mib, s.gpu_milli, s.cards, s.weight / total)
            for s in sorted(kept, key=lambda s: (s.cards, s.gpu_milli, s.cpu_milli,
                                                  s.memory_mib)))
        self._mems = sorted({s.memory_mib for s in self.shapes})
        # Per shape: (cpu it needs, index of its memory threshold, share, cards, p).
        self._rows = tuple(
            (s.cpu_milli, self._mems.index(s.memory_mib), s.gpu_milli, s.cards, s.weight)
            for s in self.shapes)
        # cpu milli the workload's GPU tasks ask per whole GPU: each shape's cpu over its
        # GPU, averaged by the shapes' popularity (task counts, not GPU demand: the figure
        # the fifth pass measured); what the cpu balance serves free GPU at
        self.cpu_per_gpu = sum(w * cpu * WHOLE / (milli * cards)
                               for cpu, _, milli, cards, w in self._rows)
        self._memo: dict[FreeState, tuple[float, float, float]] = {}

    @classmethod
    def from_requests(cls, requests: Iterable[TaskRequests],
                      starved_weight: float = STARVED_WEIGHT,
                      spared_models: Iterable[str] = (),
                      pinned_share: Mapping[str, float] | None = None) -> ShapeMix:
        """The mix of a workload: GPU tasks grouped by (cards, share), each group with the
        median cpu and memory of its tasks (what FGD calls typical pods) and weighted by the
        GPU its tasks ask for in all (FGD weighs by task count; weighing by GPU demand kept
        more whole cards usable on the openb trace: +0.1-0.2 points, see benchmarks.md)."""
        groups: dict[tuple[int, int], list[TaskRequests]] = defaultdict(list)
        for r in requests:
            if r.gpu_milli:
                cards = max(1, r.gpu_milli // WHOLE)
                groups[(cards, min(r.gpu_milli, WHOLE))].append(r)
        return cls((Shape(int(statistics.median(r.cpu_milli for r in rs)),
                          int(statistics.median(r.memory_mib for r in rs)), milli, cards,
                          float(len(rs) * milli * cards))
                    for (cards, milli), rs in groups.items()), starved_weight, spared_models,
                   pinned_share)

    def describe(self) -> list[dict[str, float | int]]:
        """The shapes as plain data (for JSON reports)."""
        return [{"cpu_milli": s.cpu_milli, "memory_mib": s.memory_mib, "gpu_milli": s.gpu_milli,
                 "cards": s.cards, "weight": round(s.weight, 4)} for s in self.shapes]

    # -- the measure -----------------------------------------------------------------------

    def fragment(self, cpu_milli: int, memory_mib: int, frees: Sequence[int]) -> float:
        """Expected free milli-GPU of a node that the mix's tasks cannot use (the paper's)."""
        return self._measure(self._state(cpu_milli, memory_mib, frees))[0]

    def cost(self, cpu_milli: int, memory_mib: int, frees: Sequence[int],
             models: Iterable[str] = ()) -> float:
        """What the gradient minimizes: ``fragment`` plus ``starved_weight_on(models)`` x the
        expected wholly free milli-GPU the node's cpu cannot feed, plus ``starved_weight`` x
        ``BALANCE_FACTOR`` x its free milli-GPU beyond what its cpu serves at
        ``cpu_per_gpu`` (the cpu balance, on every model; see the module doc); ``models``:
        the device models of the node."""
        return self._cost(self._state(cpu_milli, memory_mib, frees), self.starved_weight_on(models))

    def scarcity(self, model: str, free_model: int, free_all: int, gpu_milli: int) -> float:
        """What one replica of ``gpu_milli`` on ``model`` costs the tasks pinned to that
        model, for a task that could run elsewhere: ``pinned_share[model]`` of the pool's
        free GPU (``free_all``, milli) is held for them, and the cost is how much the
        replica grows the shortfall of the model's free GPU (``free_model``) below that
        hold - 0 while the model keeps more free than its share, the replica less its own
        part of the hold (``gpu_milli`` x (1 - share)) once it is short (see the module
        doc)."""
        share = self.pinned_share.get(model, 0.0)
        if not share:
            return 0.0
        before = max(0.0, share * free_all - free_model)
        after = max(0.0, share * (free_all - gpu_milli) - (free_model - gpu_milli))
        return after - before

    def starved_weight_on(self, models: Iterable[str]) -> float:
        """The whole-card term's weight on a node of these device models (the cpu balance
        is never spared): 0 if any is a spared model
        (one that model-constrained tasks name: the term must not push work onto or away
        from the cards those tasks can use), ``starved_weight`` otherwise."""
        if self.spared_models and not self.spared_models.isdisjoint(models):
            return 0.0
        return self.starved_weight

    def _state(self, cpu_milli: int, memory_mib: int, frees: Sequence[int]) -> FreeState:
        return (cpu_milli, bisect_right(self._mems, memory_mib), tuple(sorted(frees)))

    def _cost(self, state: FreeState, weight: float) -> float:
        fragmented, starved, unfed = self._measure(state)
        return fragmented + weight * starved + self.starved_weight * BALANCE_FACTOR * unfed

    def _measure(self, state: FreeState) -> tuple[float, float, float]:
        """(fragmented, starved, unfed) milli-GPU of one node state: the paper's measure, the
        expected wholly free cards the cpu cannot feed, the free GPU it cannot serve at
        ``cpu_per_gpu``."""
        known = self._memo.get(state)
        if known is not None:
            return known
        cpu, mem_rank, frees = state
        total = sum(frees)
        value = starved = unfed = 0.0
        if total:
            full = frees.count(WHOLE)
            for cpu_need, mem_at, milli, cards, weight in self._rows:
                fits = cpu_need <= cpu and mem_at < mem_rank and (milli < WHOLE
                                                                  or full >= cards)
                value += weight * (sum(f for f in frees if too_small(f, milli)) if fits
                                   else total)
                if fits and milli >= WHOLE and cpu_need:
                    starved += weight * max(0.0, full - cpu / cpu_need * cards) * WHOLE
            if self.cpu_per_gpu:
                unfed = max(0.0, total - cpu * WHOLE / self.cpu_per_gpu)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        known = self._memo[state] = (value, starved, unfed)
        return known

    # -- the gradient ------------------------------------------------------------------------

    def best(
        self, cpu_milli: int, memory_mib: int, frees: Sequence[int], eligible: Sequence[bool],
        req_cpu: int, req_memory: int, req_gpu_milli: int, models: Iterable[str] = (),
    ) -> tuple[float, tuple[int, ...]] | None:
        """The least growth of ``cost`` from placing one replica on this node, and the device
        indices it takes (``eligible[i]``: device ``i`` may be used); None if it does not fit.

        ``frees`` are the node's free shares of every device (all count for fragmentation);
        a share goes on the eligible card whose choice fragments least, ties to the first.
        ``models``: the node's device models (see ``starved_weight_on``).
        """
        if req_cpu > cpu_milli or req_memory > memory_mib or not req_gpu_milli:
            return None
        weight = self.starved_weight_on(models)
        before = self._cost(self._state(cpu_milli, memory_mib, frees), weight)
        cpu_left = cpu_milli - req_cpu
        mem_rank = bisect_right(self._mems, memory_mib - req_memory)
        if req_gpu_milli >= WHOLE:
            wanted = req_gpu_milli // WHOLE
            taken = tuple(i for i, f in enumerate(frees) if f >= WHOLE and eligible[i])[:wanted]
            if len(taken) < wanted:
                return None
            after = [0 if i in taken else f for i, f in enumerate(frees)]
            return self._cost((cpu_left, mem_rank, tuple(sorted(after))), weight) - before, taken
        best: tuple[float, tuple[int, ...]] | None = None
        tried: set[int] = set()
        for i, free in enumerate(frees):
            if free < req_gpu_milli or not eligible[i] or free in tried:
                continue
            tried.add(free)
            after = list(frees)
            after[i] = free - req_gpu_milli
            delta = self._cost((cpu_left, mem_rank, tuple(sorted(after))), weight) - before
            if best is None or delta < best[0]:
                best = (delta, (i,))
        return best


def named_models(selector: Selector) -> frozenset[str]:
    """The GPU models a selector names (``gpu-model = X`` or ``in (X, Y)``: a trace's
    ``gpu_spec``, a task file's ``gpu_model``), every alternative counted; a range
    (``gpu-model >= A100``) names none. Empty: the task may run on any model."""
    return frozenset(value for r in selector.requirements
                     if r.key == GPU_MODEL and r.op in ("=", "in") for value in r.values)


def pinned_shares(tasks: Iterable[tuple[TaskRequests, frozenset[str]]]) -> dict[str, float]:
    """Per GPU model, the share of a workload's GPU demand pinned to it: each task's GPU
    (``gpu_milli`` x replicas) over all GPU tasks', a task naming several models split
    evenly among them (``ShapeMix.pinned_share``); tasks naming none pin nothing."""
    pinned: dict[str, float] = defaultdict(float)
    total = 0
    for r, models in tasks:
        demand = r.gpu_milli * r.replicas
        total += demand
        for model in models if demand else ():
            pinned[model] += demand / len(models)
    return {m: v / total for m, v in sorted(pinned.items())} if total else {}


def too_small(free_milli: int, gpu_milli: int) -> bool:
    """FGD's rule for one device: ``free_milli`` left on it cannot serve a replica asking
    ``gpu_milli`` (whole cards need a wholly free card, a share at least its share). Both
    fragmentation measures apply it: ``ShapeMix`` and the capacity view's
    ``hub.planning.fragmentation``."""
    return free_milli < min(gpu_milli, WHOLE)


DEFAULT_MIX = ShapeMix([
    Shape(4000, 16384, 250, 1, 1.0), Shape(6000, 24576, 500, 1, 2.0),
    Shape(8000, 32768, WHOLE, 1, 4.0), Shape(16000, 65536, WHOLE, 2, 1.0),
    Shape(32000, 131072, WHOLE, 4, 0.5), Shape(64000, 262144, WHOLE, 8, 0.5),
], starved_weight=0.0)
"""The mix assumed when none is given (a live member before it knows its workload): shares
of a quarter and a half card, one card most often, and 2/4/8-card jobs; the paper's
gradient (the starved term needs the models constrained tasks name, unknown here)."""
