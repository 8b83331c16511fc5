"""The queueing layer's knobs (hub config key ``queueing``), read once at start.

``hub.core`` builds a ``QueueingConfig`` from the hub's YAML configuration and hands it to
``hub.queueing.Queueing``; ``hub.queueing.cycle`` (backfill) and ``hub.queueing.eviction``
(preemption) read it. Rules: docs/concepts/queues.md and preemption.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from fuyao.errors import InvalidInput


@dataclass(frozen=True)
class QueueingConfig:
    """Backfill and preemption knobs (hub config key ``queueing``)."""

    hold_cycles: int = 2            # a blocked queue head holds its queue this many cycles
    lookahead: int = 100            # then this many tasks behind it are tried per cycle
    reservation_seconds: float = 600.0   # a cluster held for a blocked head or preemptor
    preemption: bool = True
    grace_seconds: int = 30         # sent to the member with each eviction
    preemptions_per_cycle: int = 2  # tasks that may plan a preemption per cycle

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> QueueingConfig:
        """From the hub config's ``queueing`` mapping; InvalidInput names a bad key."""
        if not raw:
            return cls()
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise InvalidInput(f"queueing: unknown key {unknown[0]!r}; known: {sorted(known)}")
        out = cls(**raw)
        if out.hold_cycles < 0 or out.lookahead < 0 or out.grace_seconds < 0 \
                or out.preemptions_per_cycle < 0 or out.reservation_seconds <= 0:
            raise InvalidInput("queueing: values must not be negative")
        return out
