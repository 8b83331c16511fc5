"""Labels sent once per distinct set (``fuyao.labelsets``): any node list goes to the wire in
either form and comes back the same, and what breaks the rules is refused with its reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts, node_from_proto
from fuyao.labelsets import MAX_LABEL_SETS, MAX_LABELS, OWN_KEYS, encode, expand
from fuyao.wire.v1 import agent_pb2 as pb

label_keys = st.sampled_from(["fuyao.io/gpu-model", "fuyao.io/site", "kubernetes.io/arch",
                              "zone", *sorted(OWN_KEYS)])
node = st.builds(
    lambda i, labels, cards, free: NodeInfo(
        f"n{i}", labels, ResourceAmounts(64_000, 1024, 110), ResourceAmounts(free, 512, 100),
        tuple(DeviceInfo(f"n{i}/gpu{d}", "T4", 16384, 1000, 16384) for d in range(cards))),
    st.integers(0, 50), st.dictionaries(label_keys, st.sampled_from(["a", "b", "n1", ""]),
                                        max_size=5),
    st.integers(0, 3), st.integers(0, 64_000))


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(node, max_size=20), columns=st.booleans(), label_sets=st.booleans())
def test_any_nodes_round_trip_in_either_form(nodes: list[NodeInfo], columns: bool,
                                            label_sets: bool) -> None:
    wire, sets = encode(nodes, columns, label_sets)
    raw = pb.Inventory(nodes=wire, label_sets=sets).SerializeToString()
    back = pb.Inventory.FromString(raw)
    assert [node_from_proto(n) for n in expand(back.nodes, back.label_sets)] == nodes
    if not label_sets:
        assert not sets and not any(n.label_set for n in wire)
    else:   # each distinct shared map once, and no node keeps a shared key
        shared = [dict(s.labels) for s in sets]
        assert len({tuple(sorted(s.items())) for s in shared}) == len(shared)
        assert all(set(n.labels) <= OWN_KEYS for n in wire if n.label_set)


def test_a_set_is_sent_once_for_the_nodes_that_share_it() -> None:
    labels = {"fuyao.io/gpu-model": "A100", "kubernetes.io/arch": "amd64"}
    nodes = [NodeInfo(f"n{i}", {**labels, "kubernetes.io/hostname": f"n{i}"})
             for i in range(3)]
    wire, sets = encode(nodes)
    assert [dict(s.labels) for s in sets] == [labels]
    assert [(n.label_set, dict(n.labels)) for n in wire] == [
        (1, {"kubernetes.io/hostname": f"n{i}"}) for i in range(3)]


def _set(**labels: str) -> pb.LabelSet:
    return pb.LabelSet(labels=labels)


REFUSED = [
    ("index beyond the sets", [pb.Node(name="n1", label_set=2)], [_set(zone="a")],
     "node 'n1': label_set 2 names no set; the message carries 1"),
    ("a set named, none sent", [pb.Node(name="n1", label_set=1)], [],
     "node 'n1': label_set 1 names no set; the message carries 0"),
    ("a key in both forms", [pb.Node(name="n1", label_set=1, labels={"zone": "b"})],
     [_set(zone="a")], "node 'n1': label 'zone' is in both its labels and its label_set 1"),
    ("too many sets", [], [_set(zone="a")] * (MAX_LABEL_SETS + 1),
     f"{MAX_LABEL_SETS + 1} label sets, more than {MAX_LABEL_SETS}"),
    ("too large a set", [], [pb.LabelSet(labels={f"k{i}": "v" for i in range(MAX_LABELS + 1)})],
     f"label set 1: {MAX_LABELS + 1} labels, more than {MAX_LABELS}"),
    ("too many own labels", [pb.Node(name="n1", label_set=1, labels={
        f"k{i}": "v" for i in range(MAX_LABELS + 1)})], [_set(zone="a")],
     f"node 'n1': {MAX_LABELS + 1} labels, more than {MAX_LABELS}"),
]


@pytest.mark.parametrize(("nodes", "sets", "reason"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_what_breaks_the_rules_is_refused_with_its_reason(
        nodes: list[pb.Node], sets: list[pb.LabelSet], reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        expand(nodes, sets)
    assert reason in str(refused.value)
