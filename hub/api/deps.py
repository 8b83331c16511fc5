"""Request dependencies shared by the routers: the ``Hub`` of the running app, and the
identity ``hub.auth.guard`` verified for the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hub.auth.actor import Identity
from hub.auth.guard import identity_of
from hub.core import Hub


def _hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


HubDep = Annotated[Hub, Depends(_hub)]
IdentityDep = Annotated[Identity, Depends(identity_of)]
