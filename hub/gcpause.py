"""Cyclic garbage collection held off while the placement loop decides a burst.

A 10,000-task failover cycle spent about a fifth of its event-loop CPU in CPython's
cyclic collector (``bench/cycle_bench.py``, ``gc.callbacks``): two or three full
collections, each walking the hub's whole heap (about 350,000 tracked objects at 10,000
active tasks), and all of them found nothing to free. They were triggered by the cycle's
own short-lived objects (results, journals, staged updates and events waiting for the
writer) surviving a young collection while the cycle ran, which counts them towards the
next full one. Everything a cycle allocates is freed by reference counting; none of it is
cyclic garbage.

``collection_paused`` turns the automatic collector off for the duration of a block and
back on at its end - only if it was on when the first of any overlapping pauses began,
so a caller that disabled it (a test, an embedding program) keeps it disabled. The pause
changes no decision: nothing the placement path reads depends on when a collection runs
(the engine's lent journals are weakly referenced, but are freed by reference counting,
not by the collector). What the collector would have found is collected at the first
allocation after the pause, with the young generation; the block is bounded by the
caller (a cycle decides at most ``MAX_TASKS_PER_CYCLE`` tasks).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_state = {"depth": 0, "resume": False}   # open pauses; whether the collector was on


@contextmanager
def collection_paused() -> Iterator[None]:
    """The automatic cyclic collector off inside the block (pauses may overlap, also
    across ``await``: the collector comes back on when the last one ends)."""
    if _state["depth"] == 0:
        _state["resume"] = gc.isenabled()
        gc.disable()
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if _state["depth"] == 0 and _state["resume"]:
            gc.enable()


def paused() -> bool:
    """True while a ``collection_paused`` block is open."""
    return _state["depth"] > 0
