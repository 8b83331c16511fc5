"""``hub.heap.inventory`` freezes a large inventory once filed: safe only if nothing it
freezes is garbage. The collection before it frees what was garbage, and decoding, filing,
refiling and dropping a fleet's nodes make no reference cycles (so nothing made inside is
garbage the collector would have had to find, and what the fleet drops later is freed by
reference counting, frozen or not)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts, node_from_proto, node_to_proto
from fuyao.spec import ClusterState, TaskRequests
from hub import heap
from hub.fleet import FleetView


def node(name: str, cpu: int, models: tuple[str, ...] = (), naming: str = "") -> NodeInfo:
    prefix = naming or f"{name}/gpu"
    devices = tuple(DeviceInfo(f"{prefix}{i}", model, 81920, 1000 if i % 2 else 500, 81920)
                    for i, model in enumerate(models))
    return NodeInfo(name, {"kubernetes.io/hostname": name, "zone": "a" if cpu % 2 else "b"},
                    ResourceAmounts(64_000, 1024, 110), ResourceAmounts(cpu, 512, 100), devices)


def inventory(cpu: int) -> list[NodeInfo]:
    """Nodes of every kind the filing tells apart: CPU only, one class in the agents' naming,
    several classes, ids in another naming; decoded from the wire as the agent channel does."""
    nodes = [node(f"n{i}", cpu + i, ("A100",) * (i % 3) + ("T4",) * (i % 2 and 2),
                  "dev-" if i % 5 == 0 else "") for i in range(40)]
    return [node_from_proto(node_to_proto(n)) for n in nodes]


@pytest.fixture
def collector_off() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.mark.usefixtures("collector_off")
def test_filing_refiling_and_dropping_a_fleet_make_no_cyclic_garbage() -> None:
    fleet = FleetView()
    for name in ("c1", "c2"):
        fleet.upsert_cluster(name, labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
        fleet.replace_nodes(name, inventory(1000))       # a first inventory: one pass
    fleet.replace_nodes("c1", inventory(2000)[5:])       # a resync: node by node, some gone
    fleet.apply_delta("c1", inventory(3000)[:3], ["n7"])
    fleet.reserve("c1", "t1", TaskRequests(1000, 64, 1000, 0, 1), ["n1"])
    fleet.reserve("c1", "t2", TaskRequests(1000, 64, 0, 0, 1), ["n2"])
    fleet.release("t1")
    fleet.remove_cluster("c2")
    # the wire's messages filed as received (the agent channel's inventory path)
    fleet.upsert_cluster("c3", labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
    fleet.replace_nodes("c3", [node_to_proto(n) for n in inventory(1000)])
    fleet.replace_nodes("c3", [node_to_proto(n) for n in inventory(2000)[5:]])
    fleet.remove_cluster("c3")
    assert gc.collect() == 0   # nothing unreachable: all of it was freed by reference counting


class Cycle:
    me: Cycle


def test_a_large_inventory_is_collected_before_and_frozen_after() -> None:
    frozen = gc.get_freeze_count()
    try:
        with heap.inventory(heap.FREEZE_NODES - 1):   # small: the collector only paused
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        garbage = Cycle()
        garbage.me = garbage
        gone = weakref.ref(garbage)
        del garbage
        with heap.inventory(heap.FREEZE_NODES):
            assert gone() is None and not gc.isenabled()   # collected, not to be frozen
            kept = Cycle()
        assert gc.isenabled() and gc.get_freeze_count() > frozen
        assert not any(o is kept for o in gc.get_objects())
    finally:
        gc.unfreeze()   # give the test process its collector back
