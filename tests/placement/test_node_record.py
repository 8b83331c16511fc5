"""The hub keeps each node's report in compact form: what it gives back is the report.

``NodeState`` holds no ``NodeInfo`` (memory at 1,000,000 nodes); ``info`` rebuilds one. For
every report - devices of several classes in any order, shares, free memory, unschedulable
nodes - and any hold, the rebuilt report equals the original, a state rebuilt with another
hold still does, ``reports`` tells the same report from a changed one, and the effective
free shares are the reported ones minus the hold. Nodes of one label group share its
labels and keep only their per-node keys.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub.fleet import FleetView, NodeState
from hub.fleet.nodes import WHOLE, Hold, _held_frees
from hub.fleet.readonly import NodeLabels, NumberedIds

devices = st.lists(st.tuples(st.sampled_from(["A100", "T4"]), st.sampled_from([16, 80]),
                             st.sampled_from([0, 250, 1000]), st.integers(0, 5)), max_size=6)


def report(drawn: list[tuple[str, int, int, int]], cpu: int, unschedulable: bool,
           prefix: str = "n1/gpu") -> NodeInfo:
    return NodeInfo("n1", {"zone": "a"}, ResourceAmounts(64_000, 512, 110),
                    ResourceAmounts(cpu, 256, 100),
                    tuple(DeviceInfo(f"{prefix}{i}", model, gib * 1024, free, gib * 1024 - used)
                          for i, (model, gib, free, used) in enumerate(drawn)),
                    unschedulable)


@given(drawn=devices, cpu=st.integers(0, 64_000), unschedulable=st.booleans(),
       held=st.lists(st.sampled_from([0, 250, 500]), min_size=6, max_size=6),
       prefix=st.sampled_from(["n1/gpu", "n1/gpu1", "gpu-"]))   # the agents' naming, or not
def test_the_rebuilt_report_is_the_report(drawn: list[tuple[str, int, int, int]], cpu: int,
                                          unschedulable: bool, held: list[int],
                                          prefix: str) -> None:
    info = report(drawn, cpu, unschedulable, prefix)
    hold = Hold(1000, 10, 1, {f"{prefix}{i}": m for i, m in enumerate(held[:len(drawn)]) if m})
    state = NodeState(info, hold)
    assert state.info == info and state.reports(info)
    assert state.held(None).info == info and state.held(None).cpu == cpu
    assert state.cpu == max(0, cpu - 1000) and state.schedulable is not unschedulable
    assert state.dev_free == {d.id: min(1000, max(0, d.free_milli - hold.devices.get(d.id, 0)))
                              for d in info.devices}
    assert sorted(d for ids in state.class_ids() for d in ids) == sorted(
        d.id for d in info.devices)
    assert not state.reports(report(drawn, cpu + 1, unschedulable, prefix))
    if drawn:
        changed = [(m, g, 1000 if f != 1000 else 0, u) for m, g, f, u in drawn]
        assert not state.reports(report(changed, cpu, unschedulable, prefix))


def test_nodes_of_a_label_group_share_its_labels_and_keep_their_own_hostname() -> None:
    fleet = FleetView()
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.1, state=ClusterState.READY)
    infos = [NodeInfo(name, {"kubernetes.io/hostname": name, "zone": "a"},
                      ResourceAmounts(8000, 64, 10), ResourceAmounts(8000, 64, 10))
             for name in ("n1", "n2")]
    fleet.replace_nodes("c1", infos)
    cluster = fleet.cluster("c1")
    assert cluster is not None
    one, two = (cluster.node(name) for name in ("n1", "n2"))
    assert one is not None and two is not None
    assert dict(one.labels) == infos[0].labels and dict(two.labels) == infos[1].labels
    assert one.labels == infos[0].labels and infos[0].labels == one.labels   # Mapping's ==
    assert one.labels != infos[1].labels and one.labels != {**infos[0].labels, "zone": "b"}
    assert one.labels != {**infos[0].labels, "extra": "x"} and one.labels != ["zone"]
    assert one.info == infos[0] and two.info == infos[1]
    assert isinstance(one.labels, NodeLabels) and isinstance(two.labels, NodeLabels)
    assert one.labels.shared is two.labels.shared
    fleet.reserve("c1", "t1", TaskRequests(1000, 1, 0, 0, 1), ["n2"])   # refiled, same labels
    assert dict(cluster.node("n2").labels) == infos[1].labels   # type: ignore[union-attr]
    hostname = parse_selector("kubernetes.io/hostname=n2")
    assert [n.name for n in cluster.nodes() if hostname.matches(n.labels)] == ["n2"]


def test_nodes_reporting_the_same_devices_share_their_slot_and_keep_only_odd_ids() -> None:
    drawn = [("A100", 80, 1000, 0), ("A100", 80, 250, 3)]
    first, second = (NodeState(report(drawn, 1000, False), None) for _ in range(2))
    assert first.classes is second.classes and first.model_used is second.model_used
    assert first.ids is None   # the agents' naming: spelled out when asked
    assert [tuple(ids) for ids in first.class_ids()] == [("n1/gpu0", "n1/gpu1")]
    odd = NodeState(report(drawn, 1000, False, prefix="gpu-"), None)
    assert odd.classes is first.classes and odd.ids == (("gpu-0", "gpu-1"),)
    several = NodeState(report([*drawn, ("T4", 16, 1000, 0)], 1000, False), None)
    assert several.ids is None and [tuple(ids) for ids in several.class_ids()] == [
        ("n1/gpu0", "n1/gpu1"), ("n1/gpu2",)]


FIELDS = ("name", "alloc", "free", "schedulable", "ids", "order", "cpu", "mem", "pods",
          "primary", "model_devices", "model_used")

numbered_ids = st.builds(NumberedIds, st.sampled_from(["n1", "n1/gpu1", "a\0b"]),
                         st.integers(0, 3), st.integers(0, 8))
SPELLINGS = ("{}/gpu{}", "{}/gpu{}", "{}/gpu{}", "{}/gpu0{}", "{}/gpu+{}", "{}/gpu {}",
             "{}/gpu{}\u00b2", "{}/gpu1{}" + "0" * 30, "{}x/gpu{}", "{}/gpu{}/gpu0")


@given(ids=numbered_ids, data=st.data())
def test_a_hold_on_numbered_devices_frees_what_spelling_every_id_frees(
        ids: NumberedIds, data: st.DataObject) -> None:
    frees = tuple(data.draw(st.lists(st.integers(-100, 1200), min_size=ids.size,
                                     max_size=ids.size)))
    numbers = st.integers(ids.start - 1, ids.start + ids.size)
    held_ids = st.builds(lambda spelling, n: spelling.format(ids.node, n),
                         st.sampled_from(SPELLINGS), numbers)
    held = data.draw(st.dictionaries(held_ids, st.integers(-300, 1200), max_size=3))
    spelled = tuple(min(WHOLE, max(0, f - held.get(d, 0)))
                    for d, f in zip(list(ids), frees, strict=True))
    assert _held_frees(ids, frees, held) == spelled


def test_only_the_agents_spelling_of_a_numbered_device_is_held() -> None:
    ids = NumberedIds("n1", 1, 4)
    for spelling in SPELLINGS:
        for number in range(6):
            device = spelling.format("n1", number)
            expected = tuple(min(WHOLE, max(0, 1000 - (300 if d == device else 0)))
                             for d in ids)
            assert _held_frees(ids, (1000,) * 4, {device: 300}) == expected, device


@given(drawn=devices, cpu=st.integers(0, 64_000), unschedulable=st.booleans(),
       prefix=st.sampled_from(["n1/gpu", "gpu-"]))
def test_a_node_whose_last_hold_is_given_back_is_its_fresh_report(
        drawn: list[tuple[str, int, int, int]], cpu: int, unschedulable: bool,
        prefix: str) -> None:
    info = report(drawn, cpu, unschedulable, prefix)
    fresh = NodeState(info, None)
    held = NodeState(info, Hold(100, 1, 1, {f"{prefix}0": 250}))
    back = held.held(None)
    assert [getattr(back, f) for f in FIELDS] == [getattr(fresh, f) for f in FIELDS]
    assert [(s.frees, s.reported, s.free_memory, s.full, s.partial)
            for s in back.classes.values()] == [
        (s.frees, s.reported, s.free_memory, s.full, s.partial) for s in fresh.classes.values()]
    assert back.info == info
