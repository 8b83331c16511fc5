"""Join tokens and agent credentials: generated random, shown once, stored only as hashes.

Called by ``hub.clusters`` when a cluster joins (token) and registers (credential), and by
the agent channel to authenticate a stream.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "fyj_"        # join tokens: easy to spot in logs and secret scanners
CREDENTIAL_PREFIX = "fyc_"   # agent credentials


def new_join_token() -> str:
    """A fresh one-time join token (192 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


def new_credential() -> str:
    """A fresh long-lived agent credential (256 random bits)."""
    return CREDENTIAL_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret (no salt needed: the secret is random, not chosen)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def same_hash(a: str, b: str) -> bool:
    """Constant-time comparison of two hex digests."""
    return hmac.compare_digest(a, b)
