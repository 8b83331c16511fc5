"""A best-first heap of (total, index) entries: the highest total first, the lowest index of
equals first - the order a ``Ranking`` (``hub.placement.ranking``) selects in.

It is ``heapq`` over ``(-total, index)`` tuples, compared in compiled code as a C double
and a C integer read out of each tuple: ``heapq`` compares tuples through the generic rich
comparison (two calls a comparison, the first only to find the element that differs).
The entries stay tuples, held as plain objects so that moving one is a pointer copy: two
parallel ``list[float]`` / ``list[int]`` box a value on every store and were no quicker than
``heapq``; entries of a compiled class took 3% fewer instructions than these tuples but are
objects the collector tracks for their whole life (a tuple of a float and an int it stops
tracking at its first pass) - tens of thousands of them in a 1,000-cluster fleet's
rankings - and ran 1,000 x 1,000 at 0.84-0.94x the rate these do. Which entries it holds,
and so which one comes first, is the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

Entry = tuple[float, int]   # (total, index)


def _before(a: object, b: object) -> bool:
    """True when entry ``a`` comes out of the heap before entry ``b``. The entries are held
    as objects (moving one is a pointer copy, never a new tuple) and read here as typed
    tuples: compiled, a float and an int unboxed in place, no generic comparison."""
    x = cast(Entry, a)
    y = cast(Entry, b)
    return x[0] > y[0] or (x[0] == y[0] and x[1] < y[1])


class BestFirst:
    """Entries (total, index); the first is the one with the highest total, then lowest index.

    Totals are finite (the scheduler checks every score's range) - a NaN would not order.
    """

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[object] = []

    def __len__(self) -> int:
        return len(self._heap)

    def first(self, oks: Sequence[bool], current: Sequence[float]) -> int | None:
        """The index of the first entry still current - its index ok and its total
        ``current[index]`` - dropping the entries before it that are not (their cluster
        left, or its total moved and a newer entry holds it); None when none is."""
        heap = self._heap
        while heap:
            total, index = cast(Entry, heap[0])
            if oks[index] and current[index] == total:
                return index
            self.pop()
        return None

    def push(self, total: float, index: int) -> None:
        """Add an entry (sifted up from the last leaf)."""
        heap = self._heap
        entry: object = (total, index)
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
        heap.clear()
        for index in chosen:
            entry: object = (current[index], index)
            heap.append(entry)
        for pos in range(len(heap) // 2 - 1, -1, -1):
            _sift_down(heap, pos, heap[pos])


def _sift_down(heap: list[object], pos: int, entry: object) -> None:
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
