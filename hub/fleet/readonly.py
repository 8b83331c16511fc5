"""The fleet index's read-only collections: a node's labels (``NodeLabels``) and its
device ids in the agents' naming (``NumberedIds``), each built on data other nodes share.

They derive from ``Mapping`` and ``Sequence`` and so are kept out of the compiled engine
(``hub.native``): mypyc on CPython 3.11 gives a compiled subclass of a Python class a weak
reference slot it frees wrongly - a weak reference to one of these (hypothesis keeps them)
crashed the collector. As Python classes they are what the source runs, compiled or not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import overload


class NumberedIds(Sequence[str]):
    """Device ids ``"<node>/gpu<i>"`` for i = start, start + 1, ... (the agents' naming,
    ``fuyao.labels.devices_for``), kept as three fields and spelled out when read."""

    __slots__ = ("node", "size", "start")

    def __init__(self, node: str, start: int, size: int) -> None:
        self.node, self.start, self.size = node, start, size

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return f"{self.node}/gpu{self.start + index % self.size}"

    def __iter__(self) -> Iterator[str]:
        node = self.node
        return (f"{node}/gpu{i}" for i in range(self.start, self.start + self.size))

    def __len__(self) -> int:
        return self.size


class NodeLabels(Mapping[str, str]):
    """A node's labels: its label group's, one dict shared by every node of the group, plus
    its own per-node keys (``kubernetes.io/hostname``). Built by ``ClusterInfo`` on filing."""

    __slots__ = ("ignored", "key", "own", "shared")

    def __init__(self, shared: Mapping[str, str], key: frozenset[tuple[str, str]],
                 ignored: frozenset[str], own: tuple[tuple[str, str], ...]) -> None:
        self.shared = shared    # the group's labels
        self.key = key          # the group's key (its labels as a frozenset)
        self.ignored = ignored  # the per-node keys the grouping left out
        self.own = own          # this node's values of those

    def __getitem__(self, key: str) -> str:
        for own, value in self.own:
            if own == key:
                return value
        return self.shared[key]

    def __contains__(self, key: object) -> bool:
        return key in self.shared or any(own == key for own, _ in self.own)

    def __iter__(self) -> Iterator[str]:
        yield from (own for own, _ in self.own)
        yield from self.shared

    def __len__(self) -> int:
        return len(self.shared) + len(self.own)

    def __eq__(self, other: object) -> bool:
        """``Mapping``'s equality (same keys, same values), without copying both into dicts."""
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(other) != len(self):
            return False
        get = other.get
        return (all(get(key, _ABSENT) == value for key, value in self.own)
                and all(get(key, _ABSENT) == value for key, value in self.shared.items()))

    __hash__ = None  # type: ignore[assignment]   # a mapping: unhashable, as Mapping is


_ABSENT = object()
