"""Per-caller request rate limit: a token bucket per token name (or client address).

``hub.auth.guard`` takes one unit per request; an empty bucket refuses with ``RateLimited``
(429) and the seconds until a unit is back, which the API sends as ``Retry-After``. The rate
and burst come from the hub's configuration (``api_rate_limit``, ``api_rate_burst``).
"""

from __future__ import annotations

import math
import time

from fuyao.errors import RateLimited

MAX_CALLERS = 10_000    # buckets kept; beyond that the fullest are forgotten


class RateLimiter:
    """Token buckets by caller key."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._buckets: dict[str, tuple[float, float]] = {}   # key -> (tokens, at)

    def check(self, key: str) -> None:
        """Raise ``RateLimited`` if ``key``'s bucket is empty, without spending from it."""
        if key in self._buckets:
            self.take(key)
            tokens, at = self._buckets[key]
            self._buckets[key] = (tokens + 1.0, at)

    def take(self, key: str) -> None:
        """Spend one request for ``key``, or raise ``RateLimited``."""
        if self.rate <= 0:
            return
        now = time.monotonic()
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < 1.0:
            wait = (1.0 - tokens) / self.rate
            self._buckets[key] = (tokens, now)
            raise RateLimited(f"too many requests from {key}: at most {self.rate:g}/s "
                              f"(burst {self.burst}); retry in {wait:.1f}s",
                              retry_after=max(1.0, math.ceil(wait)))
        if len(self._buckets) >= MAX_CALLERS and key not in self._buckets:
            self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst - 1}
        self._buckets[key] = (tokens - 1.0, now)
