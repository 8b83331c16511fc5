"""FGD fragmentation against a shape distribution, on nodes whose answer is known by hand."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fuyao.capacity import Shape
from fuyao.errors import Conflict, InvalidInput
from fuyao.fragmentation import too_small
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.spec import TaskRequests, TaskSpec
from hub.fleet import ClusterInfo, NodeState
from hub.fleet.fit import plan_holds
from hub.planning.fragmentation import (
    WeightedShape,
    fragmented_devices,
    resolve,
    shapes_from_specs,
)
from tests.placement.builders import GIB, fleet_of, node

MIXED = [1000, 1000, 1000, 1000, 500, 500, 0, 0]   # 5 cards' worth free: 4 whole, 2 halves


def frag(shapes: list[Shape], **kw: object) -> dict[str, float]:
    fleet = fleet_of({"a": [node("a1", "H100", 8, free_milli=MIXED, **kw)]})  # type: ignore[arg-type]
    cluster = fleet.cluster("a")
    assert cluster is not None
    return fragmented_devices(cluster, resolve(shapes))


@pytest.mark.parametrize(("shapes", "want"), [
    ([Shape(gpu=1)], 1.0),                        # the two half cards
    ([Shape(gpu="500m")], 0.0),                   # halves fit on every free share
    ([Shape(gpu="600m")], 1.0),                   # 500m left on a card is too small
    ([Shape(gpu=8)], 5.0),                        # never fits: everything free is stranded
    ([Shape(gpu=1, gpu_model="T4")], 5.0),        # the selector rules the node out
    ([Shape(gpu=1, weight=1), Shape(gpu="500m", weight=1)], 0.5),   # mean of 1 and 0
    ([Shape(gpu=1, weight=3), Shape(gpu=8, weight=1)], 2.0),        # 3/4 x 1 + 1/4 x 5
])
def test_fragmented_devices(shapes: list[Shape], want: float) -> None:
    assert frag(shapes) == pytest.approx({"H100": want} if want else {})


def test_a_node_without_cpu_for_the_shape_strands_every_free_card() -> None:
    assert frag([Shape(gpu=1, cpu="8")], cpu=64, free_cpu=4) == pytest.approx({"H100": 5.0})


def test_shapes_come_from_the_gpu_task_mix() -> None:
    specs = [TaskSpec(name=f"t{i}", gpu=1) for i in range(3)] + [
        TaskSpec(name="big", gpu=8), TaskSpec(name="cpu", cpu=4)]
    shapes, source = shapes_from_specs(specs)
    assert source == "task mix"
    assert [(s.requests.gpu_milli, s.weight) for s in shapes] == [(1000, 0.75), (8000, 0.25)]


def test_no_gpu_task_means_the_default_shapes() -> None:
    shapes, source = shapes_from_specs([TaskSpec(name="cpu")])
    assert source == "default"
    assert [s.requests.gpu_milli for s in shapes] == [1000, 2000, 4000, 8000]


def test_a_bad_shape_is_invalid_input() -> None:
    with pytest.raises((InvalidInput, ValueError)):
        resolve([Shape(gpu=1, gpu_model=">= nonsense(")])


def _one_fits(cluster: ClusterInfo, node: NodeState, requests: TaskRequests) -> bool:
    """Would one replica fit on this node now (the reservation's own check)?"""
    try:
        plan_holds(cluster, requests, [node.name], None)
    except Conflict:
        return False
    return True


def _from_report(cluster: ClusterInfo, shapes: list[WeightedShape]) -> dict[str, float]:
    """The rule read straight off each node's rebuilt report and free-share map, device by
    device in report order: what ``fragmented_devices`` reads from the device classes."""
    out: dict[str, float] = defaultdict(float)
    for n in cluster.nodes():
        dev_free = n.dev_free
        if not n.schedulable or not any(dev_free.values()):
            continue
        for shape in shapes:
            fits = (shape.selector.matches(n.labels)
                    and _one_fits(cluster, n, shape.requests))
            per: dict[str, int] = defaultdict(int)
            for dev in n.info.devices:
                free = dev_free.get(dev.id, 0)
                if free > 0 and (not fits or too_small(free, shape.requests.gpu_milli)
                                 or dev.memory_mib < shape.requests.gpu_memory_mib):
                    per[dev.model] += free
            for model, milli in per.items():
                out[model] += shape.weight * milli / 1000
    return dict(out)


CLASSES = [("H100", 80), ("A100", 40), ("A100", 80), ("T4", 16)]
SHARES = st.sampled_from([0, 100, 250, 500, 750, 1000, 1500])   # 1500: out of range


CPUS = st.sampled_from([30_000, 48_000])


@given(nodes=st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(CLASSES), SHARES),
                                         max_size=6), st.lists(CPUS, min_size=1, max_size=3)),
                      min_size=1, max_size=4),
       holds=st.lists(st.sampled_from(["250m", "500m", "1", "2"]), max_size=6),
       shapes=st.lists(st.sampled_from([Shape(gpu="250m"), Shape(gpu="500m"), Shape(gpu=1),
                                        Shape(gpu=2), Shape(gpu=1, gpu_model="A100"),
                                        Shape(gpu="500m", gpu_memory="60Gi"),
                                        Shape(gpu=1, cpu="40")]), min_size=1, max_size=4))
@example(nodes=[([(("H100", 80), 1000)], [48_000, 30_000])], holds=[],   # alike, cpu apart
         shapes=[Shape(gpu=1, cpu="40")])
@settings(max_examples=150, deadline=None)
def test_fragmented_devices_equal_the_rule_read_device_by_device(
        nodes: list[tuple[list[tuple[tuple[str, int], int]], list[int]]], holds: list[str],
        shapes: list[Shape]) -> None:
    """Nodes of mixed device classes in any order, with hub holds on some shares. Each
    device list is reported by one to three nodes with more or less free cpu: alike reports
    share their device classes, which ``fragmented_devices`` reads once for all of them."""
    infos = []
    for i, (devices, cpus) in enumerate(nodes):
        for cpu in cpus:
            name = f"n{len(infos)}"
            infos.append(NodeInfo(
                name, {"fuyao.io/node": name}, ResourceAmounts(64_000, 512 * GIB, 110),
                ResourceAmounts(cpu, 400 * GIB, 100),
                tuple(DeviceInfo(f"{name}/gpu{k}" if i % 2 == 0 else f"dev-{name}-{k}", model,
                                 gib * GIB, free, gib * GIB)
                      for k, ((model, gib), free) in enumerate(devices))))
    fleet = fleet_of({"a": infos})
    for k, gpu in enumerate(holds):
        requests = TaskSpec(name="h", gpu=gpu).requests()
        for info in infos:
            try:
                fleet.reserve("a", f"hold-{k}", requests, [info.name])
                break
            except Conflict:
                continue
    cluster = fleet.cluster("a")
    assert cluster is not None
    weighted = resolve(shapes)
    assert fragmented_devices(cluster, weighted) == _from_report(cluster, weighted)
