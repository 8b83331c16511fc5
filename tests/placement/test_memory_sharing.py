"""GPU memory sharing (``gpu_mem``): per-device fit on the hub (memshare + the real fit and
reservations) and in the simulated member's scheduler, and that it never overcommits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.nodescheduler import LocalScheduler, Unfit, memory_share
from fuyao.selector import parse_selector
from fuyao.spec import TaskSpec
from hub.activetask import placement_request
from hub.fleet import FleetView
from hub.placement import Scheduler, memshare

from .builders import GIB, fleet_of, node

CARD_24 = node("n1", "A10", 1, device_gib=24)


def place(fleet: FleetView, scheduler: Scheduler, name: str, **fields: object) -> str | None:
    req = placement_request(name, TaskSpec.model_validate({"name": name, **fields}), 0)
    req, result = memshare.schedule(scheduler, req)
    if result.cluster is not None:
        fleet.reserve(result.cluster, name, req.requests, result.nodes, model=result.model)
    return result.cluster


SHARE = [
    ("8Gi-of-24Gi", 8 * GIB, 24 * GIB, 0, 334),
    ("whole-card-memory", 24 * GIB, 24 * GIB, 0, 1000),
    ("compute-share-wins", 1 * GIB, 24 * GIB, 500, 500),
    ("memory-wins", 12 * GIB, 24 * GIB, 250, 500),
    ("more-than-the-card", 30 * GIB, 24 * GIB, 0, 1000),
]


@pytest.mark.parametrize(("mem", "device", "compute", "want"), [c[1:] for c in SHARE],
                         ids=[c[0] for c in SHARE])
def test_memory_share(mem: int, device: int, compute: int, want: int) -> None:
    assert memory_share(mem, device, compute) == want


def test_hub_two_8gi_tasks_share_one_24gi_card_and_a_third_16gi_does_not_fit() -> None:
    fleet = fleet_of({"c1": [CARD_24]})
    scheduler = Scheduler(fleet)
    assert place(fleet, scheduler, "a", gpu_mem="8Gi") == "c1"
    assert place(fleet, scheduler, "b", gpu_mem="8Gi") == "c1"
    assert place(fleet, scheduler, "c", gpu_mem="8Gi") is None    # 8 GiB left: 334 > 332
    fleet.release("b")                                            # 16 GiB left
    assert place(fleet, scheduler, "d", gpu_mem="16Gi") is None   # 667 > 666
    assert place(fleet, scheduler, "e", gpu_mem="12Gi") == "c1"


def test_hub_16gi_does_not_fit_a_card_with_12gi_left_and_says_why() -> None:
    fleet = fleet_of({"c1": [CARD_24]})
    scheduler = Scheduler(fleet)
    assert place(fleet, scheduler, "half", gpu_mem="12Gi") == "c1"
    req = placement_request("big", TaskSpec(name="big", gpu_mem="16Gi"), 0)
    _, result = memshare.schedule(scheduler, req)
    assert result.cluster is None
    assert result.reasons == {"c1": "no node with 667m free on one GPU of >=24Gi"}


def test_hub_a_card_shared_by_memory_is_not_handed_out_whole() -> None:
    fleet = fleet_of({"c1": [CARD_24]})
    scheduler = Scheduler(fleet)
    assert place(fleet, scheduler, "nb", gpu_mem="1Gi") == "c1"
    assert place(fleet, scheduler, "whole", gpu=1) is None


def test_hub_takes_the_smallest_card_that_holds_it() -> None:
    fleet = fleet_of({"c1": [node("big", "A100", 1, device_gib=80),
                             node("small", "A10", 1, device_gib=24)]})
    scheduler = Scheduler(fleet)
    req = placement_request("t", TaskSpec(name="t", gpu_mem="20Gi"), 0)
    chosen, result = memshare.schedule(scheduler, req)
    assert (result.nodes, result.model, chosen.requests.gpu_milli) == (("small",), "A10", 834)
    req = placement_request("u", TaskSpec(name="u", gpu_mem="30Gi"), 0)
    chosen, result = memshare.schedule(scheduler, req)
    assert (result.nodes, chosen.requests.gpu_milli) == (("big",), 375)


def test_no_card_big_enough_anywhere() -> None:
    fleet = fleet_of({"c1": [CARD_24]})
    req = placement_request("t", TaskSpec(name="t", gpu_mem="40Gi"), 0)
    _, result = memshare.schedule(Scheduler(fleet), req)
    assert result.reasons == {"c1": "no node with 1 free GPU of >=40Gi"}


def test_member_binds_by_memory_per_device() -> None:
    local = LocalScheduler([CARD_24])
    anything = parse_selector("")
    ask = TaskSpec(name="t", gpu_mem="8Gi").requests()
    first, second = local.schedule(ask, anything), local.schedule(ask, anything)
    assert not isinstance(first, Unfit) and not isinstance(second, Unfit)
    assert first[0].devices == (("n1/gpu0", 334),)
    assert isinstance(local.schedule(TaskSpec(name="w", gpu=1).requests(), anything), Unfit)
    big = local.schedule(TaskSpec(name="b", gpu_mem="16Gi").requests(), anything)
    assert big == Unfit("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


def test_gpu_mem_with_whole_cards_is_refused() -> None:
    with pytest.raises(ValueError, match="gpu must be 0 or a compute share below 1"):
        TaskSpec(name="t", gpu_mem="8Gi", gpu=1)
    with pytest.raises(ValueError, match="more than 0"):
        TaskSpec(name="t", gpu_mem="0")


ASKS = st.lists(st.tuples(st.integers(1, 24 * GIB), st.sampled_from([0, 100, 250, 500])),
                min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(asks=ASKS)
def test_member_memory_sharing_never_overcommits_a_device(asks: list[tuple[int, int]]) -> None:
    local = LocalScheduler([node("n1", "A10", 2, device_gib=24, cpu=1000, memory_gib=4096)])
    held: dict[str, int] = {}
    for mem, compute in asks:
        spec = TaskSpec(name="t", gpu_mem=f"{mem}Mi", gpu=f"{compute}m" if compute else 0,
                        cpu="1m", memory="1Mi")
        bound = local.schedule(spec.requests(), parse_selector(""))
        if isinstance(bound, Unfit):
            continue
        for dev, milli in bound[0].devices:
            assert milli * 24 * GIB >= mem * 1000          # it got at least its memory
            held[dev] = held.get(dev, 0) + milli
    assert all(total <= 1000 for total in held.values())
    for info in local.node("n1").devices:
        assert info.free_milli == 1000 - held.get(info.id, 0)


@settings(max_examples=40, deadline=None)
@given(asks=ASKS)
def test_hub_memory_sharing_never_overcommits_a_device(asks: list[tuple[int, int]]) -> None:
    fleet = fleet_of({"c1": [node("n1", "A10", 2, device_gib=24, cpu=1000, memory_gib=4096)]})
    scheduler = Scheduler(fleet)
    for i, (mem, compute) in enumerate(asks):
        place(fleet, scheduler, f"t{i}", gpu_mem=f"{mem}Mi", cpu="1m", memory="1Mi",
              gpu=f"{compute}m" if compute else 0)
    info = fleet.cluster("c1")
    assert info is not None
    state = info.node("n1")
    assert state is not None
    held: dict[str, int] = {}
    for i in range(len(asks)):
        r = fleet.reservation(f"t{i}")
        if r is not None:
            for hold in r.holds.values():
                for dev, milli in hold.devices.items():
                    held[dev] = held.get(dev, 0) + milli
    assert all(0 <= total <= 1000 for total in held.values())
    assert all(state.dev_free[dev] == 1000 - held.get(dev, 0) for dev in state.dev_free)
