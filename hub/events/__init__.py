"""Task and cluster events: an in-process bus, Redis Streams when configured, watchers.

``EventHub`` (``hub.events.hub``) is created by ``Hub``: the store and the cluster manager
tell it what they committed; it numbers the events on the in-process ``EventBus`` (what a
single hub's watchers read) and, with ``--redis``, hands them to ``RedisStream`` which
publishes them to a Redis stream (what every replica's watchers read, and what tells
standbys to drop their read cache). See ``docs/events.md``.
"""

from hub.events.bus import Event, EventBus
from hub.events.hub import EventHub

__all__ = ["Event", "EventBus", "EventHub"]
