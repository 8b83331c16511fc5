"""Fleet view accounting: reservations on top of reported free, inventories, capacity rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.errors import Conflict, InvalidInput, NotFound
from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import CapacityRow, ClusterState
from hub.fleet import FleetView
from hub.fleet.cluster import _MATCH_MEMO_LIMIT, MatchMemo

from .builders import fleet_of, node, requests


def free_cards(fleet: FleetView, cluster: str, node_name: str) -> list[int]:
    c = fleet.cluster(cluster)
    assert c is not None
    state = c.node(node_name)
    assert state is not None
    return [state.dev_free[d.id] for d in state.info.devices]


def row(fleet: FleetView, cluster: str, model: str) -> CapacityRow:
    rows = [r for r in fleet.capacity(cluster) if r.model == model]
    assert len(rows) == 1
    return rows[0]


def test_reserve_holds_cards_cpu_and_memory_until_released() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 4, cpu=32, memory_gib=256)]})
    fleet.reserve("c1", "t1", requests(cpu=8, memory_gib=64, gpu_milli=2000), ["n1"])
    assert free_cards(fleet, "c1", "n1") == [0, 0, 1000, 1000]
    cap = row(fleet, "c1", "A100")
    assert (cap.devices_allocated, cap.cpu_allocated, cap.memory_allocated_gib) == (2, 8, 64)
    assert fleet.reservation_cluster("t1") == "c1"
    fleet.release("t1")
    assert free_cards(fleet, "c1", "n1") == [1000] * 4
    assert row(fleet, "c1", "A100").devices_allocated == 0
    assert fleet.reservation_cluster("t1") is None


def test_reserve_and_release_are_idempotent() -> None:
    fleet = fleet_of({"c1": [node("n1", "T4", 2)]})
    r = requests(gpu_milli=500)
    fleet.reserve("c1", "t1", r, ["n1"])
    fleet.reserve("c1", "t1", r, ["n1"])
    assert free_cards(fleet, "c1", "n1") == [500, 1000]
    fleet.release("t1")
    fleet.release("t1")
    fleet.release("never-reserved")
    assert free_cards(fleet, "c1", "n1") == [1000, 1000]


def test_shares_pack_onto_the_tightest_card() -> None:
    fleet = fleet_of({"c1": [node("n1", "T4", 3, free_milli=[1000, 700, 400])]})
    fleet.reserve("c1", "t1", requests(gpu_milli=300, replicas=2), ["n1", "n1"])
    assert free_cards(fleet, "c1", "n1") == [1000, 400, 100]
    assert row(fleet, "c1", "T4").devices_allocated == pytest.approx(1.5)


def _cards_taken(frees: list[int], milli: int, replicas: int) -> list[int] | None:
    """The rule a reservation's cards follow, replica after replica: whole cards are the
    first wholly free ones in device order; a share goes to the tightest card it fits
    (the least free, the first of equals). None when a replica finds no cards."""
    left = list(frees)
    for _ in range(replicas):
        if milli >= 1000:
            whole = [i for i, f in enumerate(left) if f >= 1000][: milli // 1000]
            if len(whole) < milli // 1000:
                return None
            for i in whole:
                left[i] -= 1000
        else:
            fitting = [(f, i) for i, f in enumerate(left) if f >= milli]
            if not fitting:
                return None
            left[min(fitting)[1]] -= milli
    return left


@settings(max_examples=200, deadline=None)
@given(frees=st.lists(st.integers(0, 10).map(lambda k: k * 100), min_size=1, max_size=8),
       milli=st.sampled_from([100, 300, 500, 700, 1000, 2000, 3000]),
       replicas=st.integers(1, 3))
def test_a_reservation_takes_the_cards_the_rule_names(
    frees: list[int], milli: int, replicas: int,
) -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", len(frees), free_milli=frees)]})
    want = _cards_taken(frees, milli, replicas)
    asked = requests(cpu=0.1, memory_gib=0.1, gpu_milli=milli, replicas=replicas)
    if want is None:
        with pytest.raises(Conflict):
            fleet.reserve("c1", "t1", asked, ["n1"] * replicas)
        assert free_cards(fleet, "c1", "n1") == frees
        return
    fleet.reserve("c1", "t1", asked, ["n1"] * replicas, model="A100")
    assert free_cards(fleet, "c1", "n1") == want
    fleet.release("t1")
    assert free_cards(fleet, "c1", "n1") == frees


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda f: f.reserve("c1", "t1", requests(gpu_milli=1000), ["n1"]), Conflict),
        (lambda f: f.reserve("c1", "t2", requests(gpu_milli=4000, replicas=2), ["n1", "n1"]),
         Conflict),
        (lambda f: f.reserve("c1", "t2", requests(), ["nope"]), Conflict),
        (lambda f: f.reserve("c1", "t2", requests(replicas=2), ["n1"]), InvalidInput),
        (lambda f: f.reserve("zz", "t2", requests(), ["n1"]), NotFound),
        (lambda f: f.reserve("c1", "t2", requests(cpu=100), ["n1"]), Conflict),
    ],
    ids=["same-task-other-request", "second-replica-does-not-fit", "unknown-node",
         "nodes-not-one-per-replica", "unknown-cluster", "cpu-beyond-free"],
)
def test_refused_reservation_changes_nothing(
    call: Callable[[FleetView], None], error: type[Exception],
) -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 6)]})
    fleet.reserve("c1", "t1", requests(gpu_milli=2000), ["n1"])
    before = fleet.capacity()
    with pytest.raises(error):
        call(fleet)
    assert fleet.capacity() == before
    assert fleet.reservation_cluster("t2") is None


def test_reports_already_count_member_use_and_holds_stay_on_top() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 4)]})
    fleet.reserve("c1", "t1", requests(gpu_milli=1000), ["n1"])
    # The member bound something else: the agent reports card 1 in use.
    fleet.apply_delta("c1", [node("n1", "A100", 4, free_milli=[1000, 0, 1000, 1000])], [])
    assert free_cards(fleet, "c1", "n1") == [0, 0, 1000, 1000]
    # A full resync with the same node keeps the hold.
    fleet.replace_nodes("c1", [node("n1", "A100", 4, free_milli=[1000, 0, 1000, 1000])])
    assert free_cards(fleet, "c1", "n1") == [0, 0, 1000, 1000]


def test_replace_nodes_drops_nodes_not_reported() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 8), node("n2", "V100", 4), node("n3")]})
    fleet.replace_nodes("c1", [node("n1", "A100", 8)])
    assert fleet.summary("c1") == {"nodes": 1, "A100": 8}
    assert [r.model for r in fleet.capacity("c1")] == ["A100"]


def test_delta_removes_and_adds_nodes() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 8), node("n2", "A100", 8)]})
    fleet.apply_delta("c1", [node("n3", "H100", 8)], ["n1", "not-there"])
    assert fleet.summary("c1") == {"nodes": 2, "A100": 8, "H100": 8}


def test_removed_cluster_takes_its_reservations() -> None:
    fleet = fleet_of({"c1": [node("n1")], "c2": [node("n2")]})
    fleet.reserve("c1", "t1", requests(), ["n1"])
    fleet.reserve("c2", "t2", requests(), ["n2"])
    fleet.remove_cluster("c1")
    fleet.remove_cluster("c1")
    assert fleet.reservation_cluster("t1") is None
    assert fleet.reservation_cluster("t2") == "c2"
    assert [c.name for c in fleet.clusters()] == ["c2"]


def test_upsert_keeps_nodes_and_reservations() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 2)]})
    fleet.reserve("c1", "t1", requests(gpu_milli=1000), ["n1"])
    fleet.upsert_cluster("c1", labels={"region": "eu"}, weight=5, headroom=0.2,
                         state=ClusterState.NOT_READY)
    c = fleet.cluster("c1")
    assert c is not None
    assert (c.weight, c.headroom, c.state, dict(c.labels)) == (
        5, 0.2, ClusterState.NOT_READY, {"region": "eu"})
    assert free_cards(fleet, "c1", "n1") == [0, 1000]


def test_state_and_cordon() -> None:
    fleet = fleet_of({"c1": [node("n1")]})
    fleet.set_cordoned("c1", True)
    fleet.set_state("c1", ClusterState.UNKNOWN)
    c = fleet.cluster("c1")
    assert c is not None
    assert (c.cordoned, c.state, c.schedulable) == (True, ClusterState.UNKNOWN, False)
    with pytest.raises(NotFound):
        fleet.set_state("zz", ClusterState.READY)
    with pytest.raises(NotFound):
        fleet.replace_nodes("zz", [])


@pytest.mark.parametrize(("weight", "headroom"), [(-1, 0.1), (1, 1.0), (1, -0.1)],
                         ids=["negative-weight", "headroom-one", "negative-headroom"])
def test_bad_cluster_settings_are_refused(weight: int, headroom: float) -> None:
    with pytest.raises(InvalidInput):
        FleetView().upsert_cluster("c1", labels={}, weight=weight, headroom=headroom,
                                   state=ClusterState.READY)


def test_every_change_gives_the_cluster_a_new_version() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 2)]})
    c = fleet.cluster("c1")
    assert c is not None
    seen = [c.version]
    changes: list[Callable[[], None]] = [
        lambda: fleet.reserve("c1", "t1", requests(gpu_milli=1000), ["n1"]),
        lambda: fleet.release("t1"),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, free_cpu=1)], []),
        lambda: fleet.set_cordoned("c1", True),
        lambda: fleet.set_state("c1", ClusterState.UNKNOWN),
        lambda: fleet.upsert_cluster("c1", labels={}, weight=3, headroom=0.1,
                                     state=ClusterState.UNKNOWN, cordoned=True),
        lambda: fleet.apply_delta("c1", [], ["n1"]),
    ]
    for change in changes:
        change()
        assert c.version not in seen
        seen.append(c.version)
    fleet.set_state("c1", ClusterState.UNKNOWN)   # no change, same version
    assert c.version == seen[-1]


def test_capacity_rows() -> None:
    fleet = fleet_of(
        {
            "b": [node("b1", "H100", 8, cpu=100, memory_gib=1000, free_cpu=60,
                       free_memory_gib=600, free_milli=[0, 0, 500] + [1000] * 5),
                  node("b2", cpu=10, memory_gib=100)],
            "a": [node("a1", "T4", 4)],
        },
        headroom=0.1,
    )
    fleet.reserve("b", "t1", requests(cpu=10, memory_gib=100, gpu_milli=1000), ["b1"])
    h100 = row(fleet, "b", "H100")
    assert h100.model_dump() == {
        "cluster": "b", "model": "H100", "nodes": 1,
        "devices_total": 8, "devices_allocated": 3.5, "devices_reserved": 0.8,
        "devices_free": 3.7,
        "cpu_total": 100.0, "cpu_allocated": 50.0, "cpu_reserved": 10.0, "cpu_free": 40.0,
        "memory_total_gib": 1000.0, "memory_allocated_gib": 500.0,
        "memory_reserved_gib": 100.0, "memory_free_gib": 400.0,
        "devices_unschedulable": 0.0, "cpu_unschedulable": 0.0, "memory_unschedulable_gib": 0.0,
        # 8 x 80 GiB; 3.5 cards in use (2 whole, a half, the reserved one) hold 280 GiB
        "gpu_memory_total_gib": 640.0, "gpu_memory_allocated_gib": 280.0,
        "gpu_memory_free_gib": 360.0,
    }
    none = row(fleet, "b", "none")
    assert (none.nodes, none.devices_total, none.cpu_total, none.cpu_free) == (1, 0, 10, 9)
    assert [(r.cluster, r.model) for r in fleet.capacity()] == [
        ("a", "T4"), ("b", "H100"), ("b", "none")]
    assert fleet.capacity("unknown") == []


def test_free_never_goes_below_zero() -> None:
    fleet = fleet_of({"c1": [node("n1", "A100", 2, free_milli=[0, 0], free_cpu=0)]},
                     headroom=0.5)
    cap = row(fleet, "c1", "A100")
    assert (cap.devices_free, cap.cpu_free, cap.memory_free_gib) == (0, 0, 256)


def test_cordoned_and_not_ready_nodes_are_in_the_total_but_never_free() -> None:
    # The field report: one cordoned 8-GPU node among two schedulable ones.
    fleet = fleet_of({"c1": [node("n1", "A100", 8), node("n2", "A100", 8),
                             node("n3", "A100", 8, unschedulable=True,
                                  free_milli=[0, 0] + [1000] * 6)]}, headroom=0.1)
    cap = row(fleet, "c1", "A100")
    assert (cap.devices_total, cap.devices_allocated, cap.devices_reserved, cap.devices_free,
            cap.devices_unschedulable) == (24, 2, 1.6, 14.4, 6)
    assert fleet.summary("c1") == {"nodes": 3, "A100": 24}
    assert fleet.unschedulable_devices("c1") == {"A100": 8}
    c1 = fleet.cluster("c1")
    assert c1 is not None and c1.device_milli("A100") == (16_000, 0)   # the headroom base


def test_summary() -> None:
    fleet = fleet_of({"c1": [node("n1", "H100", 8), node("n2", "H100", 8), node("n3", "T4", 4),
                             node("n4")]})
    assert fleet.summary("c1") == {"nodes": 4, "H100": 16, "T4": 4}
    assert fleet.summary("unknown") == {"nodes": 0}



def test_capacity_version_moves_when_what_a_cluster_offers_empty_changes() -> None:
    """``capacity_version`` moves with a node's allocatable amounts, schedulability, labels or
    devices, and when nodes come or go - not with their use or the hub's holds."""
    fleet = fleet_of({"c1": [node("n1", "A100", 2)]})
    c = fleet.cluster("c1")
    assert c is not None
    same: list[Callable[[], None]] = [
        lambda: fleet.reserve("c1", "t1", requests(gpu_milli=1000), ["n1"]),
        lambda: fleet.release("t1"),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, free_cpu=1)], []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, free_milli=[0, 500])], []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2)], []),
        lambda: fleet.set_cordoned("c1", True),      # a setting: settings_version says so
    ]
    for change in same:
        before = c.capacity_version
        change()
        assert c.capacity_version == before
    moves: list[Callable[[], None]] = [
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, cpu=32)], []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, cpu=32, unschedulable=True)],
                                  []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 2, cpu=32,
                                              labels={"zone": "b"})], []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 4, cpu=32,
                                              labels={"zone": "b"})], []),
        lambda: fleet.apply_delta("c1", [node("n1", "A100", 4, cpu=32, device_gib=40,
                                              labels={"zone": "b"})], []),
        lambda: fleet.apply_delta("c1", [node("n2", "T4", 1)], []),
        lambda: fleet.apply_delta("c1", [], ["n2"]),
        lambda: fleet.replace_nodes("c1", [node("n3")]),
    ]
    for change in moves:
        before = c.capacity_version
        change()
        assert c.capacity_version > before


def test_a_per_node_label_value_moves_no_capacity_but_a_new_per_node_key_does() -> None:
    """GPU feature discovery rewrites ``nvidia.com/gfd.timestamp`` every minute: not an offer
    of another kind (a selector naming a per-node key is never parked for it)."""
    def stamped(value: str) -> list[NodeInfo]:
        return [node("n1", "A100", 2, labels={"nvidia.com/gfd.timestamp": value})]
    fleet = fleet_of({"c1": [node("n1", "A100", 2)]})
    c = fleet.cluster("c1")
    assert c is not None
    before = c.capacity_version
    fleet.apply_delta("c1", stamped("1733370000"), [])      # a key it did not have
    assert c.capacity_version > before
    before = c.capacity_version
    fleet.apply_delta("c1", stamped("1733370060"), [])      # only the value
    assert c.capacity_version == before


def _state(fleet: FleetView) -> tuple[object, ...]:
    """What a user of the fleet sees: every node's free cards, cpu and memory, the capacity
    rows, and who holds what."""
    nodes = []
    for name in ("c1", "c2"):
        c = fleet.cluster(name)
        assert c is not None
        for n in ("n1", "n2", "n3"):
            s = c.node(n)
            assert s is not None
            nodes.append((name, n, free_cards(fleet, name, n), s.cpu, s.mem, s.pods))
    held = [fleet.reservation_cluster(f"t{i}") for i in range(12)]
    return tuple(nodes), tuple(fleet.capacity()), tuple(held)


@settings(max_examples=60, deadline=None)
@given(
    asks=st.lists(st.tuples(st.sampled_from(["c1", "c2"]), st.sampled_from([250, 500, 1000]),
                            st.lists(st.sampled_from(["n1", "n2", "n3"]), min_size=1,
                                     max_size=3)),
                  min_size=1, max_size=12),
    released=st.sets(st.integers(0, 13)),
)
def test_releasing_many_at_once_leaves_what_one_by_one_leaves(
    asks: list[tuple[str, int, list[str]]], released: set[int],
) -> None:
    def fleet() -> FleetView:
        return fleet_of({c: [node("n1", "A100", 4), node("n2", "T4", 2, cpu=8),
                             node("n3")] for c in ("c1", "c2")})
    one, many = fleet(), fleet()
    for i, (cluster, milli, nodes) in enumerate(asks):
        for f in (one, many):
            with contextlib.suppress(Conflict):   # no room: that task holds nothing
                f.reserve(cluster, f"t{i}", requests(cpu=2, gpu_milli=milli,
                                                      replicas=len(nodes)), nodes)
    ids = [f"t{i}" for i in sorted(released)]     # t12, t13: never reserved
    for task_id in ids:
        one.release(task_id)
    many.release_many(ids)
    assert _state(many) == _state(one)


def test_match_verdicts_are_shared_across_clusters_only_where_the_selector_reads_alike(
) -> None:
    """Groups of two clusters alike but for their site share a verdict for a selector that
    does not read the site, and get their own for one that does; a group whose labels
    change gets a verdict of its new labels."""
    def nodes(site: str, model: str) -> list[NodeInfo]:
        return [node(f"{site}-n1", model, 8, labels={"fuyao.io/site": site}),
                node(f"{site}-n2", labels={"fuyao.io/site": site})]

    fleet = fleet_of({"a": nodes("a", "H100"), "b": nodes("b", "H100")})

    def matched(cluster: str, text: str) -> list[str]:
        found = fleet.cluster(cluster)
        assert found is not None
        selector = parse_selector(text)
        return sorted(n for g in found.matching(selector, str(selector)).groups
                      for n in g.nodes)

    assert matched("a", "gpu-model = H100") == ["a-n1"]
    assert matched("b", "gpu-model = H100") == ["b-n1"]
    assert matched("a", "site = a") == ["a-n1", "a-n2"]
    assert matched("b", "site = a") == []
    assert matched("b", "site = b, gpu-model = H100") == ["b-n1"]
    fleet.replace_nodes("b", nodes("b", "T4"))
    assert matched("b", "gpu-model = H100") == []
    assert matched("b", "gpu-model = T4") == ["b-n1"]
    assert matched("a", "gpu-model = H100") == ["a-n1"]


_ZONE_SELECTORS = ("fuyao.io/zone = a", "fuyao.io/zone != a", "fuyao.io/zone in (a, b)",
                   "fuyao.io/zone notin (b)", "fuyao.io/zone", "!fuyao.io/zone",
                   "fuyao.io/zone = c, fuyao.io/rack = r1")
_ZONES = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                            st.integers(0, 2)), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None)
@given(first=_ZONES, later=_ZONES, asked=st.lists(st.sampled_from(_ZONE_SELECTORS),
                                                   min_size=1, max_size=5))
def test_a_selector_matches_the_groups_whose_labels_it_matches_in_the_layouts_order(
    first: list[tuple[str | None, bool, int]], later: list[tuple[str | None, bool, int]],
    asked: list[str],
) -> None:
    """Whatever the groups and however they change, a selector's matches are the groups
    its rule accepts, in the cluster's group order - judged once per value at the key a
    selector reads, shared between clusters, kept per layout."""
    def nodes(site: str, spec: list[tuple[str | None, bool, int]]) -> list[NodeInfo]:
        return [node(f"{site}-n{i}", "H100" if gpu else None, 2 if gpu else 0,
                     labels={"fuyao.io/rack": f"r{rack}"}
                     | ({"fuyao.io/zone": zone} if zone else {}))
                for i, (zone, gpu, rack) in enumerate(spec)]

    fleet = fleet_of({"x": nodes("x", first), "y": nodes("y", first)})
    for spec in (first, later):
        fleet.replace_nodes("x", nodes("x", spec))
        for text in asked:
            selector = parse_selector(text)
            for name in ("x", "y"):
                cluster = fleet.cluster(name)
                assert cluster is not None
                order = cluster._ordered_groups()
                found = cluster.matching(selector, str(selector)).groups
                assert list(found) == [g for g in order if selector.matches(g.labels)]


def test_a_selectors_classes_follow_a_group_gaining_and_losing_a_device_class() -> None:
    """A node of a new device class in a group already matched adds its class to what the
    selector matches there; the class goes when its last node does."""
    same = {"fuyao.io/gpu-memory": "80Gi"}   # one group: the labels do not tell them apart
    fleet = fleet_of({"c": [node("n1", "H100", 2, labels=same)]})
    selector = parse_selector("fuyao.io/gpu-model = H100")

    def classes() -> list[tuple[str, int]]:
        cluster = fleet.cluster("c")
        assert cluster is not None
        found = cluster.matching(selector, str(selector))
        assert len(found.groups) == 1
        return sorted((model, memory) for model, memory, _ in found.classes)

    assert classes() == [("H100", 80 * 1024)]
    fleet.apply_delta("c", [node("n2", "H100", 2, device_gib=40, labels=same)], [])
    assert classes() == [("H100", 40 * 1024), ("H100", 80 * 1024)]
    fleet.apply_delta("c", [], ["n2"])
    assert classes() == [("H100", 80 * 1024)]


def test_the_match_memo_holds_at_most_its_limit_over_all_selectors() -> None:
    """Selectors are user input: however many there are, the fleet-wide memo of their
    verdicts stays within one bound in all (it starts over when full) - selectors asked
    about on clusters with no label group, which never get a verdict, included."""
    memo = MatchMemo()
    for k in range(_MATCH_MEMO_LIMIT + 10):
        assert memo.verdicts(f"fuyao.io/pool=p{k}") == {}
    assert len(memo._by_selector) <= _MATCH_MEMO_LIMIT
    memo.clear()
    selectors = [f"fuyao.io/team=t{k}" for k in range(2_000)]
    for i in range(_MATCH_MEMO_LIMIT + 10):
        memo.keep(selectors[i % len(selectors)], f"v{i}", i % 3 == 0)
    held = sum(len(memo.verdicts(text)) for text in selectors)
    assert 0 < held <= _MATCH_MEMO_LIMIT
    memo.keep("kubernetes.io/arch=amd64", "amd64", True)
    assert memo.verdicts("kubernetes.io/arch=amd64") == {"amd64": True}
