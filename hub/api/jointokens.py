"""REST: ``/api/v1/clusters/{name}/tokens`` — join tokens of an existing cluster.

A new join token re-registers the cluster's agent (a lost or leaked agent credential is
replaced) without touching its tasks, unlike ``cluster remove``. Tokens work once, expire,
and can be listed (never the secret) and revoked by id.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from fuyao.identity import JoinTokenRequest, JoinTokenView
from fuyao.spec import JoinResponse
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.post("/{name}/tokens", status_code=201, response_model=JoinResponse)
async def create_join_token(name: str, hub: HubDep,
                            req: JoinTokenRequest | None = None) -> JoinResponse:
    """A new one-time join token for cluster ``name`` (its agent command and CA too)."""
    req = req or JoinTokenRequest()
    async with hub.audited("cluster.token.create", name):
        return await hub.clusters.issue_token(name, req.ttl_seconds)


@router.get("/{name}/tokens", response_model=list[JoinTokenView])
async def list_join_tokens(name: str, hub: HubDep) -> list[JoinTokenView]:
    """The cluster's join tokens, oldest first."""
    hub.clusters.get(name)
    now = datetime.now(UTC)
    return [
        JoinTokenView(id=t.id, cluster=t.cluster, created_at=t.created_at,
                      expires_at=t.expires_at, used_at=t.used_at,
                      state="Used" if t.used_at else "Expired" if t.expires_at <= now
                      else "Unused")
        for t in await hub.writer.read(hub.store.list_join_tokens, name)
    ]


@router.delete("/{name}/tokens/{token_id}")
async def revoke_join_token(name: str, token_id: str, hub: HubDep) -> dict[str, str]:
    """Delete a join token so it can never be used."""
    async with hub.audited("cluster.token.revoke", f"{name}/{token_id}"):
        hub.clusters.get(name)
        await hub.writer.call(hub.store.revoke_join_token, name, token_id)
    return {"revoked": token_id, "cluster": name}
