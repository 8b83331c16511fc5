"""The hub addresses an agent may dial, and which one to try next.

``fuyao-agent --hub 10.0.0.1:8849,10.0.0.2:8849`` names every hub replica (or one
load-balanced address). ``HubList`` is used by ``member_agent.connection.Agent``: it dials
``current``; when a session fails it calls ``failed`` with the leader address a standby
named in its refusal (``fuyao-leader`` trailing metadata), which is tried next if it is in
the list; otherwise the next address in order is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fuyao.errors import InvalidInput

LEADER_METADATA = "fuyao-leader"    # trailing metadata of a standby's refusal (hub side too)
MAX_HUBS = 16


def parse_hubs(value: str, flag: str = "--hub") -> tuple[str, ...]:
    """``HOST:PORT[,HOST:PORT...]`` -> the addresses; InvalidInput if one is malformed."""
    hubs = tuple(h.strip() for h in value.split(",") if h.strip())
    if not hubs:
        raise InvalidInput(f"{flag} needs at least one HOST:PORT")
    if len(hubs) > MAX_HUBS:
        raise InvalidInput(f"{flag} names {len(hubs)} addresses; at most {MAX_HUBS}")
    for hub in hubs:
        host, sep, port = hub.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidInput(f"{flag} address {hub!r} must be HOST:PORT (port 1-65535)")
    if len(set(hubs)) != len(hubs):
        raise InvalidInput(f"{flag} repeats an address: {value}")
    return hubs


def leader_hint(metadata: Iterable[Any] | None) -> str | None:
    """The leader's agent address from a standby's trailing metadata, if it named one."""
    for key, value in metadata or ():
        if key == LEADER_METADATA:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


class HubList:
    """Round-robin over the hub addresses, jumping to a named leader."""

    def __init__(self, hubs: tuple[str, ...]) -> None:
        self.hubs = hubs
        self._index = 0

    @property
    def current(self) -> str:
        """The address to dial now."""
        return self.hubs[self._index]

    def failed(self, leader: str | None = None) -> None:
        """The current address did not serve us: go to ``leader`` if known, else the next."""
        if leader is not None and leader in self.hubs and leader != self.current:
            self._index = self.hubs.index(leader)
        elif len(self.hubs) > 1:
            self._index = (self._index + 1) % len(self.hubs)
