"""The one error tree shared by hub, agent, SDK and CLI.

Every error carries how it surfaces at each boundary: an HTTP status for REST, a gRPC status
code name for the agent channel, an exit code for the CLI. Third-party errors are wrapped at
the boundary with ``raise ... from exc``; retries (tenacity) only ever retry ``Transient``.

::

    FuyaoError                      500 INTERNAL            exit 1
    ├── InvalidInput                400 INVALID_ARGUMENT    exit 2
    │   ├── PayloadTooLarge         413 INVALID_ARGUMENT    exit 2
    │   └── UnsupportedMediaType    415 INVALID_ARGUMENT    exit 2
    ├── Unauthenticated             401 UNAUTHENTICATED     exit 1
    ├── PermissionDenied            403 PERMISSION_DENIED   exit 1
    ├── NotFound                    404 NOT_FOUND           exit 1
    ├── Conflict                    409 ALREADY_EXISTS      exit 1
    └── Transient                   503 UNAVAILABLE         exit 1
        └── RateLimited             429 RESOURCE_EXHAUSTED  exit 1
"""

from __future__ import annotations

from typing import ClassVar


class FuyaoError(Exception):
    """Root of every error Fuyao raises on purpose."""

    http_status: ClassVar[int] = 500
    grpc_code: ClassVar[str] = "INTERNAL"
    exit_code: ClassVar[int] = 1
    code: ClassVar[str] = "Internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """The JSON body the REST API answers with."""
        return {"code": self.code, "message": self.message}


class InvalidInput(FuyaoError):
    """The caller sent something malformed; nothing was changed."""

    http_status = 400
    grpc_code = "INVALID_ARGUMENT"
    exit_code = 2
    code = "InvalidInput"


class PayloadTooLarge(InvalidInput):
    """A request body, batch or field over its documented size limit."""

    http_status = 413
    code = "PayloadTooLarge"


class UnsupportedMediaType(InvalidInput):
    """A mutation without a JSON content type (also what stops cross-site form posts)."""

    http_status = 415
    code = "UnsupportedMediaType"


class Unauthenticated(FuyaoError):
    """No valid credential (bearer token, join token, agent credential)."""

    http_status = 401
    grpc_code = "UNAUTHENTICATED"
    code = "Unauthenticated"


class PermissionDenied(FuyaoError):
    """A valid credential that may not do this."""

    http_status = 403
    grpc_code = "PERMISSION_DENIED"
    code = "PermissionDenied"


class NotFound(FuyaoError):
    """The named cluster, task or token does not exist."""

    http_status = 404
    grpc_code = "NOT_FOUND"
    code = "NotFound"


class Conflict(FuyaoError):
    """The request clashes with what exists (duplicate name, token already used)."""

    http_status = 409
    grpc_code = "ALREADY_EXISTS"
    code = "Conflict"


class Transient(FuyaoError):
    """A passing failure (hub unreachable, store busy): worth retrying."""

    http_status = 503
    grpc_code = "UNAVAILABLE"
    code = "Unavailable"


class RateLimited(Transient):
    """Too many requests from one token (or address): retry after ``retry_after`` seconds."""

    http_status = 429
    grpc_code = "RESOURCE_EXHAUSTED"
    code = "TooManyRequests"

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


_ALL: tuple[type[FuyaoError], ...] = (
    FuyaoError, InvalidInput, PayloadTooLarge, UnsupportedMediaType, Unauthenticated,
    PermissionDenied, NotFound, Conflict, Transient, RateLimited,
)
ERRORS_BY_CODE: dict[str, type[FuyaoError]] = {cls.code: cls for cls in _ALL}
ERRORS_BY_STATUS: dict[int, type[FuyaoError]] = {
    cls.http_status: cls for cls in _ALL if cls is not FuyaoError
}
