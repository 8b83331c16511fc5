"""``AuthService``: the hub's auth state that routes and the guard share.

Created by ``Hub`` (one line) and reached from a request as ``request.app.state.hub.auth``:
the auth mode (``token`` or ``none``), the token book, the rate limiter, and the audit sink
the guard writes refusals to.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from fuyao.errors import InvalidInput
from hub.auth.ratelimit import RateLimiter
from hub.auth.tokens import TokenBook
from hub.store.records import AuditRecord
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

AUTH_MODES = ("token", "none")
OPEN_WARNING = ("AUTHENTICATION IS OFF (--auth none): anyone who can reach the REST port is "
                "admin. Use only on a laptop; never expose this hub.")


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_auth_mode(mode: str, host: str) -> None:
    """Refuse an unknown mode, and ``none`` on anything but a loopback bind."""
    if mode not in AUTH_MODES:
        raise InvalidInput(f"--auth must be one of {', '.join(AUTH_MODES)}, got {mode!r}")
    if mode == "none" and not is_loopback(host):
        raise InvalidInput(f"--auth none is allowed only on a loopback address, not --host "
                           f"{host}: anyone who can reach it would be admin")


class AuthService:
    """Tokens, rate limit and mode of one hub."""

    def __init__(self, writer: StoreWriter, mode: str, rate: float, burst: int,
                 audit: Callable[[AuditRecord], Awaitable[None]]) -> None:
        self.mode = mode
        self.tokens = TokenBook(writer)
        self.limiter = RateLimiter(rate, burst)
        self.audit = audit

    @property
    def enabled(self) -> bool:
        """False on an open hub (``--auth none``)."""
        return self.mode != "none"

    async def start(self, home: Path) -> None:
        """Create the first admin token (token mode), or warn loudly (open mode)."""
        if not self.enabled:
            log.warning(OPEN_WARNING)
            return
        written = await self.tokens.ensure_admin(home)
        if written is not None:
            log.warning("created the first admin token: %s (readable only by its owner); "
                        "use it with FUYAO_TOKEN=$(cat %s)", written, written)
