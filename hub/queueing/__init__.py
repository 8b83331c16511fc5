"""Queues in front of placement: quotas, weighted fair share, backfill, preemption.

The hub builds one ``Queueing`` (``hub.queueing.queueing``, configured by
``hub.queueing.config.QueueingConfig``); the placement loop asks it for
each cycle's order and the REST router ``hub.api.queues`` for queue operations. Placement
(``hub.placement``) never sees queues: it gets one ``PlacementRequest`` at a time.

For ``task explain`` and ``task describe``: ``Queueing.hold_for(task)`` (an ``ActiveTask``)
returns the queue and quota state holding a queued task::

    {"queue": "team-a", "position": 3,
     "held_by": "queue team-a: gpu A100 quota 16, in use 16",   # "parked: ...", or None
     "quotas": {"gpu.A100": "16"}, "borrow": {}, "usage": {"gpu": "16", ...},
     "reserved_cluster": "c1",          # a cluster kept for it (backfill/preemption), or None
     "preempting": ["victim-1"]}        # evicted for it, waiting for the member

and None for a task that is not Queued. Rules: docs/concepts/queues.md and preemption.md.
"""

from hub.queueing.config import QueueingConfig
from hub.queueing.queueing import Queueing

__all__ = ["Queueing", "QueueingConfig"]
