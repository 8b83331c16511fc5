"""Request dependencies shared by the routers: the ``Hub`` of the running app."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hub.core import Hub


def _hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


HubDep = Annotated[Hub, Depends(_hub)]
