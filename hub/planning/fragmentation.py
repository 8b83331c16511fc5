"""Fragmentation as FGD defines it: free device capacity the common task shapes cannot use.

Shapes: a weighted list of one-replica GPU requests. ``shapes_from_specs`` draws it from a
task mix (the hub passes its active tasks: queued, placed, running) - each distinct GPU shape
weighted by how many tasks have it, the ``MAX_SHAPES`` most common kept; CPU-only tasks are
left out (they use no device, and FGD would count every free card as stranded for them).
With no GPU task in the mix, ``DEFAULT_SHAPES`` (1, 2, 4 and 8 whole cards, equal weight)
stand in. ``resolve`` turns shapes given in a file (``fuyao.capacity.Shape``) into the same.

Per node and shape (FGD, Weng et al., ATC'23): if one replica of the shape cannot go on the
node - its labels miss the shape's selector, or the fit code (``plan_holds``, what a
reservation checks) finds no room for cpu, memory, pods or devices - all the node's free
device capacity is a fragment for that shape; if it can, the fragments are the devices
whose free share is too small for it (``fuyao.fragmentation.too_small``, the rule the
placement measure ``ShapeMix`` applies too: a partly used card, for a whole-card shape; a
card with less free than the share, for a shared shape). The node's fragmentation is the
shape-weighted mean; ``fragmented_devices`` sums it per device model for one cluster.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fuyao.capacity import MAX_SHAPES, Shape
from fuyao.fragmentation import too_small
from fuyao.selector import Selector, parse_selector
from fuyao.spec import TaskRequests, TaskSpec
from hub.fleet import WHOLE, ClusterInfo, NodeState
from hub.fleet.fit import devices_for_one, room_besides_devices

DEFAULT_SHAPES = tuple(Shape(gpu=n, cpu="1", memory="1Gi", weight=1.0) for n in (1, 2, 4, 8))


@dataclass(frozen=True, slots=True)
class WeightedShape:
    """One shape as the fit code reads it, with its share of the distribution."""

    requests: TaskRequests
    selector: Selector
    weight: float
    shape: Shape


def shapes_from_specs(specs: Iterable[TaskSpec]) -> tuple[list[WeightedShape], str]:
    """The GPU shape distribution of a task mix, and where it came from."""
    counts: Counter[tuple[str, str | None, str | None, str, str, str | None]] = Counter()
    for spec in specs:
        if spec.requests().gpu_milli == 0:
            continue
        counts[(str(spec.gpu), spec.gpu_model, None if spec.gpu_memory is None
                else str(spec.gpu_memory), str(spec.cpu), str(spec.memory), spec.selector)] += 1
    if not counts:
        return resolve(DEFAULT_SHAPES), "default"
    shapes = [Shape(gpu=g, gpu_model=m, gpu_memory=gm, cpu=c, memory=mem, selector=sel,
                    weight=float(n))
              for (g, m, gm, c, mem, sel), n in counts.most_common(MAX_SHAPES)]
    return resolve(shapes), "task mix"


def resolve(shapes: Sequence[Shape]) -> list[WeightedShape]:
    """Shapes as one-replica requests with weights summing to 1 (InvalidInput if bad)."""
    total = sum(s.weight for s in shapes)
    out = []
    for shape in shapes:
        spec = shape.task_spec()
        out.append(WeightedShape(spec.requests(), parse_selector(spec.effective_selector()),
                                 shape.weight / total, shape))
    return out


def fragmented_devices(cluster: ClusterInfo, shapes: Sequence[WeightedShape]) -> dict[str, float]:
    """Shape-weighted fragmented devices of each model in ``cluster`` (schedulable nodes).

    Whether one replica fits is read from the node's counts (``room_besides_devices``,
    ``devices_for_one``: ``plan_holds``'s check); a device class's stranded share is worked
    out once per shape and free shares (``_Memo``); the sums are added node by node, model
    by model, in the order read device by device (the same floats)."""
    out: dict[str, float] = defaultdict(float)
    memos = [_Memo(shape) for shape in shapes]
    for node in cluster.nodes():
        if not node.schedulable or not any(any(s.frees) for s in node.classes.values()):
            continue
        for memo in memos:
            weight = memo.shape.weight
            for model, milli in memo.fragments(node).items():
                out[model] += weight * milli / WHOLE
    return dict(out)


class _Memo:
    """``_node_fragments`` for one shape, with each device class's part kept per (free
    shares, usable): nodes reporting alike repeat them."""

    __slots__ = ("parts", "shape")

    def __init__(self, shape: WeightedShape) -> None:
        self.shape = shape
        self.parts: dict[tuple[tuple[int, ...], bool], int] = {}

    def fragments(self, node: NodeState) -> dict[str, int]:
        """Free milli-devices per model on ``node`` that the shape cannot use."""
        shape = self.shape
        requests = shape.requests
        fits = (room_besides_devices(node, requests) and devices_for_one(node, requests)
                and shape.selector.matches(node.labels))
        want, want_memory, parts = requests.gpu_milli, requests.gpu_memory_mib, self.parts
        out: dict[str, int] = defaultdict(int)
        for (model, memory), slot in node.classes.items():
            key = (slot.frees, not fits or memory < want_memory)
            part = parts.get(key)
            if part is None:
                part = parts[key] = _stranded(slot.frees, want, key[1])
            if part:
                out[model] += part
        return out


def _stranded(frees: tuple[int, ...], want: int, unusable: bool) -> int:
    """Free milli-devices among ``frees`` (effective shares: 0 to 1000) that a replica
    wanting ``want`` cannot use (``too_small``): all of them when ``unusable`` (it does not
    fit on the node, or the devices lack its memory), all but the wholly free cards for a
    whole-card replica."""
    if unusable:
        return sum(frees)
    if want >= WHOLE:
        return sum(frees) - WHOLE * frees.count(WHOLE)
    return sum(free for free in frees if too_small(free, want))
