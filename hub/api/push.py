"""REST: ``POST /api/v1/clusters/push`` — join a member with its API credentials (push mode).

The hub checks the credentials, registers the cluster, stores them encrypted and runs the
cluster's agent itself (``hub.push``). ``cluster remove`` (``hub.api.clusters``) stops it and
deletes them through ``forget``; the cluster list marks push members through ``mode_of``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from fuyao import kubeconfig
from fuyao.errors import InvalidInput
from fuyao.pushjoin import PushJoinRequest, PushJoinResponse
from fuyao.spec import JoinRequest
from hub.api.deps import HubDep
from hub.push.supervisor import PushAgents, parse_kubeconfig

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


def agents(request: Request) -> PushAgents | None:
    """The hub's push supervisor, or None when it runs without ``--secrets-key-file``."""
    found = getattr(request.app.state, "push", None)
    return found if isinstance(found, PushAgents) else None


def mode_of(request: Request) -> set[str]:
    """Names of the push-joined clusters."""
    push = agents(request)
    return set(push.names) if push is not None else set()


async def forget(request: Request, name: str) -> None:
    """Stop a push member's agent and delete its credentials (no-op for pull members)."""
    push = agents(request)
    if push is not None:
        await push.remove(name)


@router.post("/push", status_code=201, response_model=PushJoinResponse)
async def push_join(req: PushJoinRequest, request: Request, hub: HubDep) -> PushJoinResponse:
    """Check the credentials can list nodes, store them encrypted, run the agent here."""
    push = agents(request)
    if push is None:
        raise InvalidInput("this hub takes no push joins: start it with --secrets-key-file "
                           "(a key file outside the database that encrypts the credentials)")
    doc = parse_kubeconfig(req.kubeconfig)
    join = JoinRequest(name=req.name, labels=req.labels, weight=req.weight,
                       headroom=req.headroom, token_ttl_seconds=req.token_ttl_seconds)
    _, nodes = await push.join(join, doc, hub.join_cluster)
    return PushJoinResponse(cluster=req.name, server=kubeconfig.server_of(doc), nodes=nodes)
