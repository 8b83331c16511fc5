"""The ranking's heap hands out clusters in exactly heapq's (-total, index) order.

``BestFirst`` replaced ``heapq`` over tuples for speed; a decision picks the cluster its
``first`` returns, so any difference in order would place a task elsewhere. The property
runs every operation sequence against ``heapq`` as the oracle, ties and stale entries
included (totals drawn from a few values so that equal totals are common).
"""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.placement.bestfirst import BestFirst

TOTALS = st.sampled_from([0.0, -0.0, 1.5, 50.0, 99.25, 100.0, 250.0])
INDEX = st.integers(0, 11)
OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), TOTALS, INDEX),
    st.tuples(st.just("pop"), st.just(0.0), st.just(0)),
    st.tuples(st.just("first"), st.just(0.0), st.just(0)),
    st.tuples(st.just("reset"), st.just(0.0), st.just(0)),
    st.tuples(st.just("move"), TOTALS, INDEX),
    st.tuples(st.just("flip"), st.just(0.0), INDEX),
), max_size=80)


def oracle_first(heap: list[tuple[float, int]], oks: list[bool], current: list[float],
                 ) -> int | None:
    """The code BestFirst replaced (``Ranking.best`` over heapq)."""
    while heap:
        negative, i = heap[0]
        if oks[i] and current[i] == -negative:
            return i
        heapq.heappop(heap)
    return None


@settings(max_examples=400, deadline=None)
@given(OPS, st.lists(TOTALS, min_size=12, max_size=12))
def test_every_operation_sequence_orders_as_heapq_does(
    ops: list[tuple[str, float, int]], start: list[float],
) -> None:
    current = list(start)
    oks = [i % 3 != 0 for i in range(12)]
    mine = BestFirst()
    theirs: list[tuple[float, int]] = []
    for op, total, index in ops:
        if op == "push":
            mine.push(total, index)
            heapq.heappush(theirs, (-total, index))
        elif op == "pop" and theirs:
            mine.pop()
            heapq.heappop(theirs)
        elif op == "first":
            assert mine.first(oks, current) == oracle_first(theirs, oks, current)
        elif op == "reset":
            chosen = [i for i, ok in enumerate(oks) if ok]
            mine.reset(current, iter(chosen))
            theirs[:] = [(-current[i], i) for i in chosen]
            heapq.heapify(theirs)
        elif op == "move":   # a cluster's total changed; its old entries go stale
            current[index] = total
            mine.push(total, index)
            heapq.heappush(theirs, (-total, index))
        elif op == "flip":   # a cluster became infeasible, or feasible again
            oks[index] = not oks[index]
        assert len(mine) == len(theirs)
    assert mine.first(oks, current) == oracle_first(theirs, oks, current)
    assert len(mine) == len(theirs)


def test_the_highest_total_comes_first_and_equal_totals_go_to_the_lowest_index() -> None:
    heap = BestFirst()
    for total, index in [(10.0, 4), (30.0, 7), (30.0, 2), (20.0, 0)]:
        heap.push(total, index)
    current = [20.0, 0.0, 30.0, 0.0, 10.0, 0.0, 0.0, 30.0]
    oks = [True] * 8
    assert heap.first(oks, current) == 2
    oks[2] = False   # cluster 2 left: its entry is dropped, the next equal one answers
    assert heap.first(oks, current) == 7
    assert len(heap) == 3
    current[7] = 5.0   # its total fell and no newer entry holds it: stale
    assert heap.first(oks, current) == 0
    heap.reset(current, iter([4, 7]))
    assert heap.first(oks, current) == 4
    assert len(heap) == 2
    assert BestFirst().first(oks, current) is None
