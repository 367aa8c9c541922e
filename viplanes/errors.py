"""Errors the core raises with the HTTP status and machine code the API answers with."""

from __future__ import annotations

from typing import Any


class VipError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, details: dict[str, Any] | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if code:
            self.code = code


class Invalid(VipError):
    status, code = 422, "invalid"


class Forbidden(VipError):
    status, code = 403, "forbidden"


class NotFound(VipError):
    status, code = 404, "not_found"


class Conflict(VipError):
    status, code = 409, "conflict"


class Unavailable(VipError):
    """503; ``retry_after`` (seconds) becomes the Retry-After header."""

    status, code = 503, "unavailable"

    def __init__(
        self,
        message: str,
        details: dict[str, Any] | None = None,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message, details, code)
        self.retry_after = retry_after
