"""The one FastAPI dependency every REST route runs: authenticate, rate-limit, authorize.

Installed app-wide by ``hub.api.app.create_app`` (so a router added later is covered
without doing anything). For the matched route it looks up the ``hub.auth.policy`` rule
(none: refused, deny by default), verifies the bearer token (unless the route is PUBLIC or
the hub runs ``--auth none``), spends one unit of the caller's rate limit, checks the role,
and sets the request's ``Actor`` (``hub.auth.actor.CURRENT``) that audit records carry. A
refused mutation is audited with its reason; refused reads are not (they change nothing).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.routing import Route

from fuyao.errors import FuyaoError, PermissionDenied, Unauthenticated
from hub.auth.actor import CURRENT, OPEN_HUB, Actor, Identity
from hub.auth.policy import POLICY, Access, Rule, allowed
from hub.auth.service import AuthService


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthenticated("missing 'Authorization: Bearer <token>' header (fuyaoctl: "
                              "--token, FUYAO_TOKEN or a config context)")
    return value.strip()


def rule_for(request: Request) -> tuple[str, Rule]:
    """The matched route's path template and its policy rule (deny if it has none)."""
    route: Any = request.scope.get("route")
    path = route.path if isinstance(route, Route) else request.url.path
    rule = POLICY.get((request.method, path))
    if rule is None:
        raise PermissionDenied(f"no access policy for {request.method} {path}: refused")
    return path, rule


async def guard(request: Request) -> Identity | None:
    """Authenticate and authorize the request; the caller's identity (None if PUBLIC)."""
    path, rule = rule_for(request)
    if rule.access == Access.PUBLIC:
        return None
    auth: AuthService = request.app.state.hub.auth
    source = request.client.host if request.client else ""
    request_id = str(getattr(request.state, "request_id", ""))
    identity: Identity | None = None
    try:
        if not auth.enabled:
            identity = OPEN_HUB
        else:
            failures = f"failed logins from {source}"
            auth.limiter.check(failures)     # bounds guessing, before the slow hash
            try:
                identity = await auth.tokens.authenticate(_bearer(request))
            except Unauthenticated:
                auth.limiter.take(failures)
                raise
        auth.limiter.take(f"token {identity.name}")
        if not allowed(identity.role, rule):
            what = rule.action or f"{request.method} {path}"
            raise PermissionDenied(f"token {identity.name} (role {identity.role.value}) may "
                                   f"not {what}")
    except FuyaoError as exc:
        if rule.action:
            who = (Actor(identity.name, identity.role.value, source, request_id)
                   if identity else Actor("anonymous", "", source, request_id))
            target = str(request.path_params.get("name", ""))
            await auth.audit(who.record(rule.action, target, f"refused: {exc.message}"))
        raise
    CURRENT.set(Actor(identity.name, identity.role.value, source, request_id, identity))
    request.state.identity = identity
    return identity


async def identity_of(request: Request) -> Identity:
    """The identity ``guard`` verified for this request. ``async`` though it never waits:
    FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop per request."""
    identity: Identity | None = getattr(request.state, "identity", None)
    if identity is None:
        raise Unauthenticated("no identity for this request")
    return identity
