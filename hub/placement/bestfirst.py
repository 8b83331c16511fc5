"""A best-first heap of (total, index) entries: the highest total first, the lowest index of
equals first - the order a ``Ranking`` (``hub.placement.ranking``) selects in.

It is ``heapq`` over ``(-total, index)`` tuples, with entries of a compiled class so that
the engine compares their fields as a C double and a C integer: ``heapq`` compares tuples
through the generic rich comparison (two calls a comparison, the first only to find the
element that differs). Kept in two parallel ``list[float]`` / ``list[int]`` the values would
be boxed on every store and unboxed on every read - slower than the tuples. Which entries
it holds, and so which one comes first, is the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class _Entry:
    """One entry; compiled, its fields are a C double and a C integer read in place."""

    __slots__ = ("index", "total")

    def __init__(self, total: float, index: int) -> None:
        self.total = total
        self.index = index


def _before(a: _Entry, b: _Entry) -> bool:
    """True when ``a`` comes out of the heap before ``b``."""
    return a.total > b.total or (a.total == b.total and a.index < b.index)


class BestFirst:
    """Entries (total, index); the first is the one with the highest total, then lowest index.

    Totals are finite (the scheduler checks every score's range) - a NaN would not order.
    """

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._heap)

    def first(self, oks: Sequence[bool], current: Sequence[float]) -> int | None:
        """The index of the first entry still current - its index ok and its total
        ``current[index]`` - dropping the entries before it that are not (their cluster
        left, or its total moved and a newer entry holds it); None when none is."""
        heap = self._heap
        while heap:
            top = heap[0]
            index = top.index
            if oks[index] and current[index] == top.total:
                return index
            self.pop()
        return None

    def push(self, total: float, index: int) -> None:
        """Add an entry (sifted up from the last leaf)."""
        heap = self._heap
        entry = _Entry(total, index)
        heap.append(entry)
        pos = len(heap) - 1
        while pos > 0:
            parent = (pos - 1) >> 1
            above = heap[parent]
            if not _before(entry, above):
                break
            heap[pos] = above
            pos = parent
        heap[pos] = entry

    def pop(self) -> None:
        """Drop the first entry (the last leaf sifted down from the root)."""
        heap = self._heap
        last = heap.pop()
        if heap:
            _sift_down(heap, 0, last)

    def reset(self, current: Sequence[float], chosen: Iterable[int]) -> None:
        """Hold exactly one entry per chosen index, its total ``current[index]`` (Floyd's
        construction: linear, not n log n)."""
        heap = self._heap
        heap[:] = [_Entry(current[index], index) for index in chosen]
        for pos in range(len(heap) // 2 - 1, -1, -1):
            _sift_down(heap, pos, heap[pos])


def _sift_down(heap: list[_Entry], pos: int, entry: _Entry) -> None:
    """Put ``entry`` at ``pos``, moving the better child up until neither comes before it."""
    size = len(heap)
    child = 2 * pos + 1
    while child < size:
        best = heap[child]
        right = child + 1
        if right < size:
            other = heap[right]
            if _before(other, best):
                child, best = right, other
        if not _before(best, entry):
            break
        heap[pos] = best
        pos = child
        child = 2 * pos + 1
    heap[pos] = entry
