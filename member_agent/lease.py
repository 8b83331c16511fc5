"""Lease renewal, the agent's half of fencing (docs/concepts/lifecycle.md).

``member_agent.connection.Agent`` renews the member's lease only on proof of a live
session with the hub: the hub accepting a stream (its initial metadata carries the lease
time) and each ``HeartbeatAck``. The renewal runs to when the proven request *left* the
agent plus the lease time, never from when the proof arrived, so the member's lease
always ends no later than the hub's own deadline (last message heard + lease + margin).
A backend that can be fenced implements ``LeaseHolder``; one that cannot is left alone.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol, runtime_checkable

FEATURES_METADATA = "fuyao-features"   # hub.agent_service sends it (no import)
LEASE_METADATA = "fuyao-lease-seconds"
_KEEP = 256


@runtime_checkable
class LeaseHolder(Protocol):
    """A backend whose member enforces a lease (sim member process, kube Lease object)."""

    async def renew_lease(self, sent_monotonic: float, lease_seconds: float) -> None:
        """Extend the member's lease to ``sent_monotonic + lease_seconds`` (monotonic)."""
        ...


class HeartbeatClock:
    """When each heartbeat left (monotonic), by the ``sent_unix_ms`` the hub echoes."""

    def __init__(self) -> None:
        self._sent: OrderedDict[int, float] = OrderedDict()

    def sent(self, unix_ms: int) -> None:
        """Record a heartbeat leaving now."""
        self._sent[unix_ms] = time.monotonic()
        while len(self._sent) > _KEEP:
            self._sent.popitem(last=False)

    def acked(self, unix_ms: int) -> float | None:
        """The send time of the acknowledged heartbeat (older ones are forgotten)."""
        sent = self._sent.get(unix_ms)
        if sent is None:
            return None
        while self._sent:
            key, _ = self._sent.popitem(last=False)
            if key == unix_ms:
                break
        return sent

    def clear(self) -> None:
        """Forget everything (a new session)."""
        self._sent.clear()


def lease_from_metadata(metadata: object) -> float | None:
    """The lease time the hub announced in the stream's initial metadata, if any."""
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == LEASE_METADATA:
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                return None
            return seconds if seconds > 0 else None
    return None


def features_from_metadata(metadata: object) -> frozenset[str]:
    """The protocol features the hub announced in the stream's initial metadata."""
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == FEATURES_METADATA and isinstance(value, str):
            return frozenset(f.strip() for f in value.split(",") if f.strip())
    return frozenset()
