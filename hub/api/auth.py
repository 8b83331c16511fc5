"""REST: ``/api/v1/auth`` — API tokens (create, list, revoke; admin only) and ``whoami``."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.identity import TokenCreated, TokenRequest, TokenView, WhoAmI
from hub.api.deps import HubDep, IdentityDep

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.get("/whoami", response_model=WhoAmI)
async def whoami(hub: HubDep, identity: IdentityDep) -> WhoAmI:
    """The name, role and queues of the token this request carries."""
    return WhoAmI(name=identity.name, role=identity.role, queues=list(identity.queues),
                  auth=hub.auth.mode)


@router.post("/tokens", status_code=201, response_model=TokenCreated)
async def create_token(req: TokenRequest, hub: HubDep) -> TokenCreated:
    """A new token with a role (and, for a submitter, its queues); shown only once."""
    async with hub.audited("auth.token.create", req.name) as notes:
        created = await hub.auth.tokens.create(req)
        notes.append(f"role {req.role.value}" + (f", queues {','.join(req.queues)}"
                                                 if req.queues else ""))
    return created


@router.get("/tokens", response_model=list[TokenView])
async def list_tokens(hub: HubDep) -> list[TokenView]:
    """Every token (never its secret), revoked and expired ones too."""
    return await hub.auth.tokens.list()


@router.delete("/tokens/{name}", response_model=TokenView)
async def revoke_token(name: str, hub: HubDep) -> TokenView:
    """Revoke a token: it stops working at once and stays listed as Revoked."""
    async with hub.audited("auth.token.revoke", name):
        return await hub.auth.tokens.revoke(name)
