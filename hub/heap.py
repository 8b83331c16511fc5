"""Garbage-collector settings for the hub process: what is loaded at start is frozen out of
the collector's view, and young objects are collected in larger steps.

Called once by ``hub.server`` after the hub has started (store loaded, servers built). The
hub is one process whose heap is mostly long-lived (modules, the fleet view, active tasks),
while a busy placement loop allocates and frees short-lived objects by the million. With
CPython's default thresholds (700, 10, 10) the collector ran a full pass over the whole heap
about once a second in the e2e bench's burst, each pass 0.2-0.5 s with the GIL held (every
stage of every task waits). ``gc.freeze()`` moves what exists now into the permanent
generation (never scanned; still freed by reference counting when dropped), and larger
thresholds make young collections rarer. Cyclic garbage is still collected, a little later.

A large inventory (``FREEZE_NODES`` nodes or more: an agent's first, or a resync) is frozen
the same way once filed (``inventory``): its node states are long-lived, and left to the
collector each would be walked by a young pass, a middle one and every full pass after (at
1,000 clusters x 1,000 nodes the passes over the growing fleet took 3.5-6 s of a 16-20 s
build, and a pass costs more per object as the heap grows). The order is: a full collection
over what is not frozen yet, then the inventory decoded and filed with the collector paused,
then ``gc.freeze()``. What is frozen, and why that is safe:

- no garbage that existed before: the collection just ran;
- no garbage made since: between the collection and the freeze only the decoding and the
  filing run (the agent channel's handler does not await in between, so no other task
  does), and they make no reference cycles (``tests/hub/test_heap.py`` decodes, files,
  refiles and drops fleets with the collector off and finds no cyclic garbage), so what
  they drop is freed by reference counting, frozen or not; node states replaced later, or
  a cluster that leaves, are freed the same way;
- what else is alive and not yet frozen at that moment (objects allocated since the last
  freeze: tasks in flight, other streams' state) is frozen with it, as ``settle`` freezes
  what is loaded at start; what of it later becomes cyclic garbage is kept until a
  ``gc.unfreeze()`` (the hub calls none: an agent that reconnects often with a large
  inventory keeps that much more each time).

The collection before is over the unfrozen part only: right after a freeze (agents
connecting one after another) it is nearly empty, not the fleet.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from hub.fleet import collector_paused

# Net new container objects before a young collection (default 700). 50,000 since
# 2026-12-07: a 10,000-task failover leaves ~24 objects a task alive while its commits are
# in flight, and at 20,000 the young passes walked them every ~1,000 placements; in five
# alternated runs of failover_bench 0.97x the time (median 1.080 against 1.116 s, 100,000
# no better), the e2e bench's hub CPU the same (docs/reliability.md, twenty-sixth session).
YOUNG = 50_000
MIDDLE = 20      # young collections before a middle one (default 10)
OLD = 10         # middle collections before a full one is considered (default 10)
FREEZE_NODES = 1_000   # an inventory at least this large is frozen once filed


def settle() -> None:
    """Collect once, freeze what survives, and raise the collection thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)


@contextmanager
def inventory(nodes: int) -> Iterator[None]:
    """Around decoding and filing an inventory of ``nodes`` nodes: the collector paused and,
    for ``FREEZE_NODES`` nodes or more, a full collection before and a freeze after (see the
    module docstring). Nothing inside may await."""
    large = nodes >= FREEZE_NODES
    if large:
        gc.collect()
    with collector_paused():
        yield
    if large:
        gc.freeze()
