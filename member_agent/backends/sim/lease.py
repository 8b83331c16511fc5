"""The sim member's lease: how long it may run restartable copies without news of the hub.

Used by ``member_agent.backends.sim.member.SimMember``. The agent renews it (``renew``)
only on proof of a live session with the hub (a HeartbeatAck, or the hub accepting a new
stream), with ``until`` = when that proof's request left the agent + the hub's lease
time, on CLOCK_MONOTONIC, which every process of the machine shares. So however late a
renewal arrives (the agent frozen between the ack and the write), it never reaches past
what the hub assumes. Never renewed counts as expired: a fresh member starts nothing
restartable until an agent with a live session renewed it.
"""

from __future__ import annotations

import time

REASON_EXPIRED = "member lease expired (no live session with the hub)"


class Lease:
    """Expiry time of the member's lease, and whether the expiry was acted on."""

    def __init__(self) -> None:
        self.until: float | None = None
        self._acted = True     # nothing to stop before the first renewal

    def renew(self, until: float) -> None:
        """Extend the lease to ``until`` (monotonic); never shortens it."""
        if self.until is None or until > self.until:
            self.until = until
        if self.valid():
            self._acted = False

    def valid(self, now: float | None = None) -> bool:
        """True while the lease holds."""
        now = time.monotonic() if now is None else now
        return self.until is not None and now < self.until

    def newly_expired(self, now: float | None = None) -> str:
        """The reason to stop restartable copies, once per expiry; "" otherwise."""
        if self._acted or self.valid(now):
            return ""
        self._acted = True
        return REASON_EXPIRED

    def refusal(self, now: float | None = None) -> str:
        """Why a restartable copy may not start now ("" if it may)."""
        return "" if self.valid(now) else REASON_EXPIRED + ": not starting it"
