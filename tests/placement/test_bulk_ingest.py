"""A first inventory is filed in one pass (``replace_nodes`` into a cluster without nodes):
the view it leaves is the one node-by-node ``apply_delta`` leaves.

Everything the fit search, the scheduler and the REST views read is compared, order
included (dict order decides ties in the fit search): node states field by field, label
groups and their cpu and per-class buckets, the per-model rows, the cluster sums, which
model versions exist; and both paths move the versions. Reports are drawn with label sets
that repeat or not, per-node keys (hostname, GFD timestamp) or none, labels given as a
mapping that is not a dict, devices of several classes in any order, ids in the agents'
naming or not, shares beyond a card or below zero, cordoned nodes, duplicate names, and
holds that reservations left on nodes the inventory brings back.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts, node_from_proto, node_to_proto
from fuyao.labelsets import MAX_LABEL_SETS, MAX_LABELS, encode, expand
from fuyao.spec import ClusterState, TaskRequests
from fuyao.wire.v1 import agent_pb2 as pb
from hub.fleet import NO_MODEL, ClusterInfo, FleetView
from hub.fleet.cluster import Group
from hub.fleet.nodes import NodeState
from hub.fleet.readonly import NodeLabels
from hub.fleet.view import PER_NODE_LABEL_KEYS

device = st.tuples(st.sampled_from([("A100", 81920), ("A100", 40960), ("T4", 16384), ("", 0)]),
                   st.sampled_from([1000, 1000, 0, 250, 500, 1200, -5]), st.integers(0, 3))
report = st.fixed_dictionaries({
    "name": st.integers(0, 15),
    "zone": st.sampled_from(["a", "b"]),
    "per_node": st.sampled_from(["none", "hostname", "both"]),
    "proxy": st.booleans(),
    "cpu": st.integers(-10, 64_000),
    "devices": st.lists(device, max_size=5),
    "naming": st.sampled_from(["agent", "agent", "other"]),
    "unschedulable": st.booleans(),
})


def node_info(drawn: dict[str, Any]) -> NodeInfo:
    name = f"n{drawn['name']}"
    labels = {"zone": drawn["zone"], "arch": "amd64"}
    if drawn["per_node"] != "none":
        labels = {"kubernetes.io/hostname": name, **labels}
    if drawn["per_node"] == "both":
        labels["nvidia.com/gfd.timestamp"] = str(drawn["cpu"])
    if drawn["devices"]:
        labels["fuyao.io/gpu-model"] = drawn["devices"][0][0][0]
    prefix = f"{name}/gpu" if drawn["naming"] == "agent" else "dev-"
    devices = tuple(DeviceInfo(f"{prefix}{i}", model, memory, free, memory - used * 100)
                    for i, ((model, memory), free, used) in enumerate(drawn["devices"]))
    return NodeInfo(name, MappingProxyType(labels) if drawn["proxy"] else labels,
                    ResourceAmounts(64_000, 512 * 1024, 110),
                    ResourceAmounts(drawn["cpu"], 256 * 1024, 100), devices,
                    drawn["unschedulable"])


def state_of(node: NodeState) -> tuple[object, ...]:
    labels = node.labels
    assert isinstance(labels, NodeLabels)
    return (node.name, list(labels.items()), labels.key, labels.own, node.alloc, node.free,
            node.schedulable, node.order, node.cpu, node.mem, node.pods,
            dict(node.model_devices), dict(node.model_used), node.primary, node.info,
            node.ids, [tuple(ids) for ids in node.class_ids()],
            [(cls, slot.frees, slot.reported, slot.free_memory, slot.full, slot.partial)
             for cls, slot in node.classes.items()])


def group_of(group: Group) -> tuple[object, ...]:
    return (group.key, group.labels, group.sort_key, list(group.nodes),
            [list(b) for b in group.cpu_buckets], group.cpu_top, group.gpu_nodes,
            group.free_cpu,
            [(cls, [list(b) for b in index.full], [list(b) for b in index.partial],
              index.free_milli) for cls, index in group.classes.items()])


# ModelTotals' fields (a compiled class has no __slots__ to read them from: hub.native)
TOTALS_FIELDS = ("cpu_total", "cpu_used", "devices", "mem_total", "mem_used", "nodes",
                 "off_cpu_total", "off_cpu_used", "off_devices", "off_mem_total",
                 "off_mem_used", "off_used_milli", "used_milli")


def view_of(cluster: ClusterInfo) -> tuple[object, ...]:
    totals = [(model, {k: getattr(row, k) for k in TOTALS_FIELDS})
              for model, row in cluster.totals().items()]
    return ([state_of(cluster._nodes[n]) for n in cluster._nodes],
            {n: g.key for n, g in cluster._node_group.items()},
            [group_of(g) for g in cluster._groups.values()],
            totals, list(cluster.model_versions),
            (cluster.cpu_total, cluster.cpu_used, cluster.memory_total, cluster.memory_used,
             cluster.schedulable_nodes))


def fleet_with_holds(held: list[int]) -> tuple[FleetView, ClusterInfo]:
    """A fleet whose cluster has no node but holds on ``held`` (nodes that left)."""
    fleet = FleetView()
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
    if held:
        fleet.replace_nodes("c1", [NodeInfo(f"n{i}", {}, ResourceAmounts(64_000, 1024, 110),
                                            ResourceAmounts(64_000, 1024, 110))
                                   for i in held])
        for i in held:
            fleet.reserve("c1", f"t{i}", TaskRequests(1000, 64, 0, 0, 1), [f"n{i}"])
        fleet.replace_nodes("c1", [])   # the nodes leave; their holds stay
    cluster = fleet.cluster("c1")
    assert cluster is not None and cluster.node_count == 0
    return fleet, cluster


@settings(max_examples=300, deadline=None)
@given(drawn=st.lists(report, max_size=14),
       held=st.lists(st.integers(0, 15), max_size=3, unique=True))
def test_a_first_inventory_in_one_pass_is_node_by_node(drawn: list[dict[str, Any]],
                                                       held: list[int]) -> None:
    infos = [node_info(d) for d in drawn]
    bulk, one_pass = fleet_with_holds(held)
    single, by_node = fleet_with_holds(held)
    before = (one_pass.version, one_pass.layout_version)
    bulk.replace_nodes("c1", infos)             # the cluster has no node: one pass
    for info in {i.name: i for i in infos}.values():   # the last report of a name wins
        single.apply_delta("c1", [info], [])    # node by node, as _put files them
    assert view_of(one_pass) == view_of(by_node)
    moved = (one_pass.version != before[0], one_pass.layout_version != before[1])
    assert moved == ((True, True) if infos else (False, False))
    assert bulk.capacity() == single.capacity()
    touched = {m for n in one_pass.nodes() for m in n.model_devices or (NO_MODEL,)}
    assert all(one_pass.model_version(m) > before[0] for m in touched)


#: What a wire-filing property draws: a first inventory, nodes held, a resync, a delta, and
#: nodes gone (indices into the drawn reports).
WIRE_RUN: dict[str, st.SearchStrategy[Any]] = dict(
    drawn=st.lists(report, max_size=14),
    held=st.lists(st.integers(0, 15), max_size=3, unique=True),
    resync=st.lists(report, max_size=14), delta=st.lists(report, max_size=6),
    gone=st.lists(st.integers(0, 15), max_size=3))


@settings(max_examples=200, deadline=None)
@given(**WIRE_RUN,
       columns=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_the_wire_messages_file_as_their_node_infos(drawn: list[dict[str, Any]],
                                                     held: list[int],
                                                     resync: list[dict[str, Any]],
                                                     delta: list[dict[str, Any]],
                                                     gone: list[int],
                                                     columns: tuple[bool, bool, bool]) -> None:
    """The agent channel files an inventory's and a delta's ``pb.Node``s as received: the
    same view as the ``NodeInfo``s they decode to (what it filed before; label order as the
    wire map gives it), first inventory (one pass), resync and delta (node by node) alike,
    devices sent as messages or in columns (``DeviceColumns``; a resync or a delta may
    switch), and nothing of a message kept (a state holds only its own types)."""
    first = [node_to_proto(node_info(d), columns[0]) for d in drawn]
    again = [node_to_proto(node_info(d), columns[1])
             for d in drawn[: len(drawn) // 2] + resync]
    changed = [node_to_proto(node_info(d), columns[2]) for d in delta]
    removed = [f"n{i}" for i in gone]
    wire, by_wire = fleet_with_holds(held)
    plain, by_info = fleet_with_holds(held)
    for inventory in (first, again):
        wire.replace_nodes("c1", inventory)
        plain.replace_nodes("c1", [node_from_proto(n) for n in inventory])
        assert view_of(by_wire) == view_of(by_info)
    wire.apply_delta("c1", changed, removed)
    plain.apply_delta("c1", [node_from_proto(n) for n in changed], removed)
    assert view_of(by_wire) == view_of(by_info)
    assert wire.capacity() == plain.capacity()
    for node in by_wire.nodes():
        assert type(node.labels) is NodeLabels and type(node.alloc) is ResourceAmounts
        assert type(node.free) is ResourceAmounts and type(node.name) is str
        assert all(type(k) is str and type(v) is str for k, v in node.labels.items())
        assert set(node.labels) >= set(node.labels.shared)
        assert not set(dict(node.labels.own)) - set(PER_NODE_LABEL_KEYS)


def test_a_second_inventory_refiles_node_by_node() -> None:
    fleet, cluster = fleet_with_holds([])
    first = [node_info({"name": i, "zone": "a", "per_node": "hostname", "proxy": False,
                        "cpu": 1000 * i, "devices": [(("T4", 16384), 1000, 0)],
                        "naming": "agent", "unschedulable": False}) for i in range(4)]
    fleet.replace_nodes("c1", first)
    fleet.replace_nodes("c1", first[1:])      # a resync: one left, the rest unchanged
    assert [n.name for n in cluster.nodes()] == ["n1", "n2", "n3"]
    assert [n.info for n in cluster.nodes()] == first[1:]


def test_a_first_inventory_leaves_no_node_log_to_trust() -> None:
    """The one-pass filing does not log nodes one by one, so the node-level fit check
    (``nodes_changed_since``) must send any fit kept from before it back to the search."""
    fleet, cluster = fleet_with_holds([])
    nodes = [node_info({"name": i, "zone": "a", "per_node": "hostname", "proxy": False,
                        "cpu": 1000, "devices": [(("T4", 16384), 1000, 0)],
                        "naming": "agent", "unschedulable": False}) for i in range(3)]
    before = cluster.version
    fleet.replace_nodes("c1", nodes)
    assert cluster.nodes_changed_since(before) is None
    assert cluster.nodes_changed_since(cluster.version) == []


def labels_unordered(view: tuple[object, ...]) -> tuple[object, ...]:
    """``view_of`` with each node's labels and own labels as sets: the wire's maps give no
    order, and a node naming a label set brings its own keys in a map of their own."""
    states, *rest = view
    assert isinstance(states, list)
    return ([(s[0], frozenset(s[1]), s[2], frozenset(s[3]), *s[4:]) for s in states], *rest)


@settings(max_examples=200, deadline=None)
@given(**WIRE_RUN,
       label_sets=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_label_sets_file_as_the_whole_maps(drawn: list[dict[str, Any]], held: list[int],
                                           resync: list[dict[str, Any]],
                                           delta: list[dict[str, Any]], gone: list[int],
                                           label_sets: tuple[bool, bool, bool]) -> None:
    """Labels sent once per set (``label-sets``, as the agent channel passes them) file as
    the ``NodeInfo``s the nodes stand for: first inventory (one pass, sets read once), resync
    and delta (expanded first) alike, either form in each message."""
    def sent(infos: list[NodeInfo], sets: bool) -> pb.Inventory:
        nodes, table = encode(infos, True, sets)
        return pb.Inventory.FromString(
            pb.Inventory(nodes=nodes, label_sets=table).SerializeToString())

    first = sent([node_info(d) for d in drawn], label_sets[0])
    again = sent([node_info(d) for d in drawn[: len(drawn) // 2] + resync], label_sets[1])
    changed = sent([node_info(d) for d in delta], label_sets[2])
    removed = [f"n{i}" for i in gone]
    wire, by_wire = fleet_with_holds(held)
    plain, by_info = fleet_with_holds(held)
    for inventory in (first, again):
        wire.replace_nodes("c1", inventory.nodes, inventory.label_sets)
        plain.replace_nodes("c1", [node_from_proto(n) for n in
                                   expand(inventory.nodes, inventory.label_sets)])
        assert labels_unordered(view_of(by_wire)) == labels_unordered(view_of(by_info))
    wire.apply_delta("c1", expand(changed.nodes, changed.label_sets), removed)
    plain.apply_delta("c1", [node_from_proto(n) for n in
                             expand(changed.nodes, changed.label_sets)], removed)
    assert labels_unordered(view_of(by_wire)) == labels_unordered(view_of(by_info))
    assert wire.capacity() == plain.capacity()
    for node in by_wire.nodes():
        assert type(node.labels) is NodeLabels
        assert all(type(k) is str and type(v) is str for k, v in node.labels.items())


PLAIN = {"name": 0, "zone": "a", "per_node": "hostname", "proxy": False, "cpu": 1000,
         "devices": [(("T4", 16384), 1000, 0)], "naming": "agent", "unschedulable": False}


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize(("sets", "number", "reason"), [
    ([{"zone": "a"}], 2, "label_set 2 names no set"),
    ([{"zone": "a", "kubernetes.io/hostname": "x"}], 1, "is in both its labels"),
    ([{"zone": "a"}] * (MAX_LABEL_SETS + 1), 1, f"label sets, more than {MAX_LABEL_SETS}"),
    ([{f"k{i}": "v" for i in range(MAX_LABELS + 1)}], 1, f"more than {MAX_LABELS}"),
])
def test_a_refused_label_set_changes_nothing(first: bool, sets: list[dict[str, str]],
                                            number: int, reason: str) -> None:
    """A first inventory (one pass) and a resync (checked before any node is dropped) alike:
    a node naming a set that breaks the rules leaves the view as it was, and what the refused
    one left behind changes no later filing."""
    fleet, cluster = fleet_with_holds([])
    kept = node_info({**PLAIN, "name": 1})
    if not first:
        fleet.replace_nodes("c1", [kept])
    before = labels_unordered(view_of(cluster))
    good, table = encode([node_info({**PLAIN, "name": 2, "per_node": "none"})])
    bad = pb.Node(name="bad", label_set=number, labels={"kubernetes.io/hostname": "bad"})
    table = [pb.LabelSet(labels=s) for s in sets]
    with pytest.raises(InvalidInput, match=reason):
        fleet.replace_nodes("c1", [*good, bad], table)
    assert labels_unordered(view_of(cluster)) == before
    fresh, fresh_cluster = fleet_with_holds([])
    if not first:
        fresh.replace_nodes("c1", [kept])
    retry, retry_sets = encode([node_info({**PLAIN, "name": 3})])
    for view in (fleet, fresh):
        view.replace_nodes("c1", retry, retry_sets)
    assert labels_unordered(view_of(cluster)) == labels_unordered(view_of(fresh_cluster))


@settings(max_examples=200, deadline=None)
@given(drawn=st.lists(report, max_size=10, unique_by=lambda d: d["name"]),
       forms=st.tuples(st.booleans(), st.booleans()),
       used=st.integers(0, 63_000))
def test_a_report_of_use_alone_leaves_the_offer_as_it_was(drawn: list[dict[str, Any]],
                                                          forms: tuple[bool, bool],
                                                          used: int) -> None:
    """Parked tasks (``hub.queueing.parking``) wait for a cluster's ``capacity_version`` to
    move: a node filed from a label set and reported again with other use only (or a new
    GFD timestamp), in either form, must not move it - the wire's maps give no key order."""
    def sent(infos: list[NodeInfo], sets: bool) -> pb.Inventory:
        nodes, table = encode(infos, True, sets)
        return pb.Inventory.FromString(
            pb.Inventory(nodes=nodes, label_sets=table).SerializeToString())

    fleet, cluster = fleet_with_holds([])
    first = sent([node_info(d) for d in drawn], forms[0])
    fleet.replace_nodes("c1", first.nodes, first.label_sets)
    version = cluster.capacity_version
    # the same nodes, other use: cpu free (and the GFD timestamp, which follows it) changed
    again = sent([node_info({**d, "cpu": used}) for d in drawn], forms[1])
    fleet.apply_delta("c1", expand(again.nodes, again.label_sets), [])
    assert cluster.capacity_version == version


@pytest.mark.parametrize("delta_as_pb", [False, True])
def test_per_node_keys_in_another_order_leave_the_offer_as_it_was(delta_as_pb: bool) -> None:
    """The property above, made certain: the wire's maps give their keys in an order of the
    process's making, so it failed only now and then (the hostname and GFD timestamp a node
    was filed with, reported again the other way round, moved ``capacity_version`` and
    woke every parked task on every delta). Here the second report names them reversed."""
    def info(cpu: int, own: list[tuple[str, str]]) -> NodeInfo:
        return NodeInfo("n0", {**dict(own), "zone": "a"}, ResourceAmounts(64_000, 1024, 110),
                        ResourceAmounts(cpu, 1024, 110))

    own = [("kubernetes.io/hostname", "n0"), ("nvidia.com/gfd.timestamp", "1")]
    fleet, cluster = fleet_with_holds([])
    fleet.replace_nodes("c1", [info(1000, own)])
    version = cluster.capacity_version
    again = info(2000, [(k, "2" if k.endswith("timestamp") else v) for k, v in own[::-1]])
    assert list(again.labels)[:2] == ["nvidia.com/gfd.timestamp", "kubernetes.io/hostname"]
    if delta_as_pb:
        nodes, _ = encode([again], True, False)
        fleet.apply_delta("c1", list(nodes), [])
    else:
        fleet.apply_delta("c1", [again], [])
    assert cluster.capacity_version == version
    moved = info(2000, [*own[::-1], ("rack", "r1")])   # a new key: the offer does move
    fleet.apply_delta("c1", [moved], [])
    assert cluster.capacity_version != version
