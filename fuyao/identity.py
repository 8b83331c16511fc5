"""API models for identities: REST bearer tokens, roles, ``whoami`` and cluster join tokens.

Shared by the hub's auth routes (``hub.api.auth``, ``hub.api.jointokens``) and the SDK/CLI
(``fuyaoctl``), like ``fuyao.spec`` for tasks and clusters. See docs/security.md.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fuyao.spec import check_name

MAX_TOKEN_QUEUES = 64
MAX_TOKEN_TTL_SECONDS = 10 * 366 * 24 * 3600


class Role(StrEnum):
    """What a REST token may do (docs/security.md has the whole table)."""

    ADMIN = "admin"          # everything
    OPERATOR = "operator"    # clusters, queues, profiles, cordon; read all
    SUBMITTER = "submitter"  # submit, cancel and read its own tasks in its queues
    VIEWER = "viewer"        # read all


class TokenRequest(BaseModel):
    """``fuyaoctl auth token create NAME --role R [--queue Q] [--expires 30d]``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    role: Role
    queues: list[str] = Field(default_factory=list, max_length=MAX_TOKEN_QUEUES)
    expires_in_seconds: int | None = Field(default=None, ge=60, le=MAX_TOKEN_TTL_SECONDS)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "token name")

    @field_validator("queues")
    @classmethod
    def _queues(cls, value: list[str]) -> list[str]:
        return sorted({check_name(q, "queue name") for q in value})

    @model_validator(mode="after")
    def _scope(self) -> TokenRequest:
        if self.role == Role.SUBMITTER and not self.queues:
            raise ValueError("a submitter token needs at least one queue (--queue)")
        if self.role != Role.SUBMITTER and self.queues:
            raise ValueError(f"queues scope submitter tokens only, not {self.role.value}")
        return self


class TokenCreated(BaseModel):
    """Shown once: the token is stored only as a slow salted hash."""

    name: str
    token: str
    role: Role
    queues: list[str] = Field(default_factory=list)
    expires_at: datetime | None = None


class TokenView(BaseModel):
    """A token as ``auth token list`` shows it (never the secret)."""

    name: str
    role: Role
    queues: list[str] = Field(default_factory=list)
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
    state: str = Field(description="Active, Expired or Revoked")


class WhoAmI(BaseModel):
    """The identity behind the token of the request."""

    name: str
    role: Role
    queues: list[str] = Field(default_factory=list)
    auth: str = Field(default="token", description="'token', or 'none' on an open hub")


class JoinTokenRequest(BaseModel):
    """``fuyaoctl cluster token create NAME [--expires 24h]``."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: int = Field(default=24 * 3600, ge=60, le=30 * 24 * 3600)


class JoinTokenView(BaseModel):
    """A cluster's join token as ``cluster token list`` shows it (never the secret)."""

    id: str = Field(description="a prefix of the token's hash: what 'revoke' takes")
    cluster: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    state: str = Field(description="Unused, Used or Expired")
