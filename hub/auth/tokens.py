"""REST bearer tokens: created random, shown once, stored as a salted scrypt hash.

A token reads ``fyt_<id>_<secret>``: the id finds the stored row, the secret is checked
against its slow hash (scrypt, so a stolen database does not yield usable tokens). The
outcome of that check is remembered for a few seconds by the SHA-256 of the whole token, so
a busy client pays the slow hash once, not per request; a revocation on this hub takes
effect at once, on another replica within ``RECHECK_SECONDS``. When the store cannot be
read (the database is down), a token verified within ``STALE_SECONDS`` is still trusted, so
the hub keeps serving what it holds in memory (reads, and the 503 of a refused write)
instead of refusing every caller; a token never verified is refused (503) until the store
is back. Last use is recorded at most once a minute per token. Called by ``hub.auth.guard``
(every request) and the token routes.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fuyao.errors import Transient, Unauthenticated
from fuyao.identity import Role, TokenCreated, TokenRequest, TokenView
from hub.auth.actor import Identity
from hub.store.records import ApiTokenRecord
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

PREFIX = "fyt_"
ADMIN_TOKEN_FILE = "admin.token"
ADMIN_TOKEN_NAME = "admin"
RECHECK_SECONDS = 5.0        # how long a verified token is trusted before the store is re-read
STALE_SECONDS = 300.0        # ... and, while the store cannot be read, at most this long
TOUCH_SECONDS = 60.0         # last-use written at most this often per token
_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1}


def hash_token(secret: str, salt: bytes | None = None) -> str:
    """``scrypt$<salt>$<hash>`` of a token's secret part."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def verify_token(secret: str, stored: str) -> bool:
    """True if ``secret`` matches the stored ``scrypt$salt$hash`` (constant-time compare)."""
    try:
        kind, salt, _ = stored.split("$")
        salt_bytes = bytes.fromhex(salt)
    except ValueError:
        return False
    return kind == "scrypt" and hmac.compare_digest(hash_token(secret, salt_bytes), stored)


def split_token(token: str) -> tuple[str, str]:
    """``(id, secret)`` of a bearer token; Unauthenticated if it is not one of ours."""
    if not token.startswith(PREFIX) or len(token) > 200:
        raise Unauthenticated("bearer token is not a Fuyao API token (fyt_...)")
    token_id, sep, secret = token[len(PREFIX):].partition("_")
    if not sep or not token_id or not secret:
        raise Unauthenticated("bearer token is malformed")
    return token_id, secret


def token_state(rec: ApiTokenRecord, now: datetime) -> str:
    """Active, Expired or Revoked."""
    if rec.revoked_at is not None:
        return "Revoked"
    if rec.expires_at is not None and rec.expires_at <= now:
        return "Expired"
    return "Active"


def token_view(rec: ApiTokenRecord) -> TokenView:
    """The API's view of a token."""
    return TokenView(name=rec.name, role=Role(rec.role), queues=list(rec.queues),
                     created_at=rec.created_at, expires_at=rec.expires_at,
                     revoked_at=rec.revoked_at, last_used_at=rec.last_used_at,
                     state=token_state(rec, datetime.now(UTC)))


@dataclass
class _Verified:
    record: ApiTokenRecord
    checked: float          # monotonic time the record was last read from the store
    touched: float          # monotonic time last use was last written


class TokenBook:
    """Create, verify, list and revoke API tokens."""

    def __init__(self, writer: StoreWriter) -> None:
        self.writer = writer
        self._verified: dict[str, _Verified] = {}    # sha256(token) -> last verification

    async def create(self, req: TokenRequest) -> TokenCreated:
        """A new token; the returned secret is never stored or shown again."""
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        expires = (now + timedelta(seconds=req.expires_in_seconds)
                   if req.expires_in_seconds else None)
        rec = ApiTokenRecord(id=token_id, name=req.name, token_hash=hash_token(secret),
                             role=req.role.value, queues=list(req.queues), created_at=now,
                             expires_at=expires)
        await self.writer.call(self.writer.store.add_api_token, rec)
        return TokenCreated(name=req.name, token=f"{PREFIX}{token_id}_{secret}", role=req.role,
                            queues=list(req.queues), expires_at=expires)

    async def list(self) -> list[TokenView]:
        """Every token, by name."""
        return [token_view(r) for r in await self.writer.read(self.writer.store.list_api_tokens)]

    async def revoke(self, name: str) -> TokenView:
        """Revoke a token at once (it stays listed as Revoked)."""
        rec = await self.writer.call(self.writer.store.revoke_api_token, name, datetime.now(UTC))
        self._verified = {k: v for k, v in self._verified.items() if v.record.id != rec.id}
        return token_view(rec)

    async def authenticate(self, token: str) -> Identity:
        """The identity of a bearer token; Unauthenticated if unknown, revoked or expired."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        seen = self._verified.get(key)
        if seen is None or now - seen.checked > RECHECK_SECONDS:
            try:
                seen = await self._verify(key, token, seen, now)
            except Transient:
                if seen is None or now - seen.checked > STALE_SECONDS:
                    raise
                log.debug("store unavailable: trusting token %s as verified %.0fs ago",
                            seen.record.name, now - seen.checked)
        state = token_state(seen.record, datetime.now(UTC))
        if state != "Active":
            raise Unauthenticated(f"token {seen.record.name} is {state.lower()}")
        if now - seen.touched > TOUCH_SECONDS:
            seen.touched = now
            try:
                await self.writer.call(self.writer.store.touch_api_token, seen.record.id,
                                       datetime.now(UTC))
            except Exception:     # bookkeeping only: never refuse a request for it
                log.exception("could not record last use of token %s", seen.record.name)
        rec = seen.record
        return Identity(rec.name, Role(rec.role), tuple(rec.queues), rec.id)

    async def _verify(self, key: str, token: str, seen: _Verified | None,
                      now: float) -> _Verified:
        """Read the token's record and check its secret (Transient if the store is down)."""
        token_id, secret = split_token(token)
        rec = await self.writer.read(self.writer.store.api_token, token_id)
        # The same token (``key`` is its digest) against the same stored hash verifies as it
        # did: scrypt only for a token not seen yet or whose hash changed, and then off the
        # event loop (it takes ~50-100 ms of CPU, and every token was re-hashed every
        # ``RECHECK_SECONDS`` on the loop, in front of agents' heartbeats).
        same = seen is not None and rec is not None and seen.record.token_hash == rec.token_hash
        if rec is None or not (same or await asyncio.to_thread(verify_token, secret,
                                                               rec.token_hash)):
            self._verified.pop(key, None)
            raise Unauthenticated("bearer token is not valid")
        verified = _Verified(rec, now, seen.touched if seen else 0.0)
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[key] = verified
        return verified

    async def ensure_admin(self, home: Path) -> Path | None:
        """On a hub without a live ``admin`` token: create one and write it to
        ``<home>/admin.token`` (0600). Returns the file when it wrote one."""
        tokens = await self.writer.read(self.writer.store.list_api_tokens)
        now = datetime.now(UTC)
        if any(t.name == ADMIN_TOKEN_NAME and token_state(t, now) == "Active" for t in tokens):
            return None
        created = await self.create(TokenRequest(name=ADMIN_TOKEN_NAME, role=Role.ADMIN))
        path = home / ADMIN_TOKEN_FILE
        write_secret(path, created.token + "\n")
        return path


def write_secret(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), replacing any old one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
