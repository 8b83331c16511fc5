"""ASGI middleware in front of every REST route: request ids, body size, content type,
cross-site requests.

``create_app`` wraps the REST app in ``Guardrails``. For each HTTP request it:

- takes the caller's ``X-Request-Id`` (1-64 of ``[A-Za-z0-9._-]``) or makes one, puts it in
  ``request.state.request_id`` (audit records carry it) and echoes it in the answer;
- refuses a body over ``max_body_bytes`` with 413, reading at most that much (a declared
  ``Content-Length`` over the limit is refused before reading anything);
- refuses a mutation (POST, PUT, PATCH, DELETE) without ``Content-Type: application/json``
  with 415: a cross-site HTML form or ``fetch`` can only send "simple" content types
  without a CORS preflight, and the hub answers no preflight;
- refuses a request whose ``Origin`` is not the hub itself with 403.

Refusals use the one error envelope ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fuyao.errors import FuyaoError, PayloadTooLarge, PermissionDenied, UnsupportedMediaType
from fuyao.spec import error_body
from hub.auth.actor import CURRENT, SYSTEM

MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def same_origin(origin: str, host: str) -> bool:
    """True if the ``Origin`` header names the host the request was sent to."""
    if origin == "null":
        return False
    parts = urlsplit(origin)
    return bool(parts.netloc) and parts.netloc.lower() == host.lower()


class Guardrails:
    """The middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        try:
            self._check(scope["method"], headers)
            body = await self._read_body(receive, headers)
        except FuyaoError as exc:
            await _refuse(send, exc, request_id)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                   (b"x-request-id", request_id.encode())]}
            await send(message)

        outer = CURRENT.set(SYSTEM)     # the request's actor never outlives the request
        try:
            await self.app(scope, replay, send_with_id)
        finally:
            CURRENT.reset(outer)

    def _check(self, method: str, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, headers.get("host", "")):
            raise PermissionDenied(f"cross-origin request from {origin[:100]} refused")
        if method in MUTATIONS:
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                raise UnsupportedMediaType(
                    f"{method} needs 'Content-Type: application/json' (got "
                    f"{kind[:100] or 'none'}), even without a body")

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        limit = self.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"request body of {int(declared)} bytes is over the limit "
                                  f"of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body is over the limit of {limit} bytes")
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        return b"".join(chunks)


async def _refuse(send: Send, exc: FuyaoError, request_id: str) -> None:
    body = json.dumps(error_body(exc.code, exc.message)).encode()
    headers: list[Any] = [(b"content-type", b"application/json"),
                          (b"content-length", str(len(body)).encode()),
                          (b"x-request-id", request_id.encode())]
    await send({"type": "http.response.start", "status": exc.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
