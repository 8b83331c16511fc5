"""The web view at ``/ui``: one static page (HTML, JS, CSS shipped in this package).

``router`` serves ``/ui`` (the page) and ``/ui/static/<file>`` (its script and style); no
build step, no CDN. The page reads the same REST endpoints as ``fuyaoctl`` - clusters,
``/capacity/report``, ``/capacity/n-1``, ``/capacity/history``, tasks - with the same bearer
token (typed into the page, kept in sessionStorage) and polls them every few seconds.
``hub.api.app`` registers the router. See docs/capacity.md.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from fuyao.errors import NotFound

router = APIRouter(tags=["ui"], include_in_schema=False)

_STATIC = files(__package__) / "static"
_TYPES = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:"}


@router.get("/ui", response_class=HTMLResponse)
async def page() -> HTMLResponse:
    """The web view."""
    return HTMLResponse((_STATIC / "index.html").read_text(), headers=_HEADERS)


@router.get("/ui/static/{name}")
async def asset(name: str) -> Response:
    """The page's script and style (only the files listed; nothing else is served)."""
    kind = _TYPES.get(name)
    if kind is None:
        raise NotFound(f"no web view asset {name!r}")
    return Response((_STATIC / name).read_text(), media_type=kind, headers=_HEADERS)
