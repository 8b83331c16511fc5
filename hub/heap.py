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
"""

from __future__ import annotations

import gc

YOUNG = 20_000   # net new container objects before a young collection (default 700)
MIDDLE = 20      # young collections before a middle one (default 10)
OLD = 10         # middle collections before a full one is considered (default 10)


def settle() -> None:
    """Collect once, freeze what survives, and raise the collection thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
