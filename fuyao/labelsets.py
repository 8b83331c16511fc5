"""Labels sent once per distinct set: the ``label-sets`` protocol feature.

A fleet's nodes repeat a few label maps (per cluster: one per node kind and arch), yet each
node sent its whole map: ~250 bytes a node on the wire and, on the hub, a map parsed and read
key by key. To a hub that announced ``label-sets`` the agent (``member_agent.connection``)
sends each distinct map once in the message's ``label_sets`` and each node names its set by
``label_set`` (1 + the index; 0 for none), keeping in ``labels`` only its own keys
(``OWN_KEYS``: the hostname, GFD's timestamp). ``encode`` builds that form; the hub
(``hub.agent_service``, ``hub.fleet``) files it as it files whole maps, and ``expand`` gives
back the plain form for the paths that read labels node by node (deltas, resyncs, catalog
renames).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo, node_to_proto
from fuyao.wire.v1 import agent_pb2 as pb

FEATURE_LABEL_SETS = "label-sets"
"""What a hub lists in ``fuyao-features`` when it reads ``label_sets``."""

OWN_KEYS = frozenset({"kubernetes.io/hostname", "nvidia.com/gfd.timestamp"})
"""Keys whose values differ from node to node: an agent keeps them on the node, and the hub
leaves them out when it groups nodes by labels (``hub.fleet.view.PER_NODE_LABEL_KEYS``)."""

MAX_LABEL_SETS = 4096
"""At most this many sets in one message (an agent sends the rest as whole maps)."""

MAX_LABELS = 256
"""At most this many labels in one set, and in one node's own labels beside its set."""

SetKey = tuple[tuple[str, str], ...]


def encode(nodes: Iterable[NodeInfo], columns: bool = False,
           label_sets: bool = True) -> tuple[list[pb.Node], list[pb.LabelSet]]:
    """Nodes in the ``label-sets`` form: (the wire's nodes, the sets they name); without
    ``label_sets`` (a hub that did not announce them), each with its whole map and no sets."""
    if not label_sets:
        return [node_to_proto(node, columns) for node in nodes], []
    index: dict[SetKey, int] = {}
    sets: list[pb.LabelSet] = []
    out: list[pb.Node] = []
    for node in nodes:
        labels = node.labels
        key = tuple(sorted(kv for kv in labels.items() if kv[0] not in OWN_KEYS))
        number = index.get(key, 0)
        if not number and key and len(sets) < MAX_LABEL_SETS and len(key) <= MAX_LABELS:
            sets.append(pb.LabelSet(labels=dict(key)))
            number = index[key] = len(sets)
        if not number:   # nothing shared, or past a bound: the whole map, as before
            out.append(node_to_proto(node, columns))
            continue
        own = {k: v for k, v in labels.items() if k in OWN_KEYS}
        out.append(node_to_proto(node, columns, labels=own, label_set=number))
    return out, sets


def check_sets(sets: Sequence[pb.LabelSet]) -> None:
    """Refuse (``InvalidInput``) a message with more than ``MAX_LABEL_SETS`` sets or a set of
    more than ``MAX_LABELS`` labels."""
    if len(sets) > MAX_LABEL_SETS:
        raise InvalidInput(f"{len(sets)} label sets, more than {MAX_LABEL_SETS}")
    for i, found in enumerate(sets, 1):
        if len(found.labels) > MAX_LABELS:
            raise InvalidInput(f"label set {i}: {len(found.labels)} labels, more than "
                               f"{MAX_LABELS}")


def named_set(name: str, number: int, own: Sequence[str],
              sets: Sequence[pb.LabelSet]) -> Mapping[str, str]:
    """The labels of set ``number`` (1-based) that node ``name`` names, beside its ``own``
    label keys; refused (``InvalidInput``) when no such set was sent, when an own key is
    also the set's, or when the node has more than ``MAX_LABELS`` own labels."""
    if number > len(sets):
        raise InvalidInput(f"node {name!r}: label_set {number} names no set; the message "
                           f"carries {len(sets)}")
    if len(own) > MAX_LABELS:
        raise InvalidInput(f"node {name!r}: {len(own)} labels, more than {MAX_LABELS}")
    shared = sets[number - 1].labels
    both = next((key for key in own if key in shared), None)
    if both is not None:
        raise InvalidInput(f"node {name!r}: label {both!r} is in both its labels and its "
                           f"label_set {number}; an agent sends one or the other")
    return shared


def expand(nodes: Sequence[pb.Node], sets: Sequence[pb.LabelSet]) -> Sequence[pb.Node]:
    """``nodes`` with each set named put back into the node's own labels (the plain form),
    checked as ``check_sets`` and ``named_set`` check them; ``nodes`` itself when none
    names a set."""
    check_sets(sets)
    if not any(node.label_set for node in nodes):
        return nodes
    out: list[pb.Node] = []
    for node in nodes:
        number = node.label_set
        if not number:
            out.append(node)
            continue
        shared = named_set(node.name, number, tuple(node.labels), sets)
        plain = pb.Node()
        plain.CopyFrom(node)
        plain.label_set = 0
        plain.labels.update(shared)
        out.append(plain)
    return out
