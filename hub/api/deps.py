"""Request dependencies shared by the routers: the ``Hub`` of the running app, and the
identity ``hub.auth.guard`` verified for the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hub.auth.actor import Identity
from hub.auth.guard import identity_of
from hub.core import Hub


async def _hub(request: Request) -> Hub:
    """The app's hub. ``async`` though it never waits: FastAPI runs a plain ``def``
    dependency in its thread pool, a thread hop per request (two, with ``identity_of``)."""
    hub: Hub = request.app.state.hub
    return hub


HubDep = Annotated[Hub, Depends(_hub)]
IdentityDep = Annotated[Identity, Depends(identity_of)]
