"""FGD fragmentation against a shape distribution, on nodes whose answer is known by hand."""

from __future__ import annotations

import pytest

from fuyao.capacity import Shape
from fuyao.errors import InvalidInput
from fuyao.spec import TaskSpec
from hub.planning.fragmentation import fragmented_devices, resolve, shapes_from_specs
from tests.placement.builders import fleet_of, node

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
