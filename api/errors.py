"""Every error the API answers is JSON ``{error, message, details}`` with a 4xx/5xx status."""

from __future__ import annotations

import logging
from typing import Any

import marshmallow as ma
from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from flask_smorest import Api
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import HTTPException

from viplanes.errors import VipError

log = logging.getLogger(__name__)


class ErrorSchema(ma.Schema):
    error = ma.fields.String(required=True, metadata={"description": "machine-readable code"})
    message = ma.fields.String(required=True, metadata={"description": "for people"})
    details = ma.fields.Dict(required=True, metadata={"description": "field errors or context"})


def error_response(
    status: int, error: str, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> ResponseReturnValue:
    resp = jsonify({"error": error, "message": message, "details": details or {}})
    resp.status_code = status
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "rate_limited",
}


class VipApi(Api):
    """flask-smorest's Api with our error shape (documented as the default response)."""

    ERROR_SCHEMA = ErrorSchema

    def handle_http_exception(self, error: HTTPException) -> ResponseReturnValue:
        status = error.code or 500
        data = getattr(error, "data", None) or {}
        details = data.get("errors") or data.get("messages") or {}
        if not isinstance(details, dict):
            details = {"errors": details}
        message = data.get("message") or (error.description or error.name)
        if status == 422 and "message" not in data:
            message = "request failed validation; see details"
        if status == 400 and details.get("json"):
            message = "request body is not valid JSON"
        code = data.get("error") or _CODES.get(status, "server_error" if status >= 500 else "error")
        return error_response(status, code, message, details, data.get("headers"))


def register(app: Flask) -> None:
    @app.errorhandler(VipError)
    def _vip(exc: VipError) -> ResponseReturnValue:
        retry = getattr(exc, "retry_after", None)
        return error_response(
            exc.status, exc.code, exc.message, exc.details, {"Retry-After": str(retry)} if retry else None
        )

    @app.errorhandler(OperationalError)
    def _db_down(exc: OperationalError) -> ResponseReturnValue:
        log.error("database unavailable: %s", str(exc).splitlines()[0])
        return error_response(
            503, "database_unavailable", "the database is unavailable; try again", headers={"Retry-After": "5"}
        )

    @app.errorhandler(DBAPIError)
    def _connection_dropped(exc: DBAPIError) -> ResponseReturnValue:
        if not exc.connection_invalidated:  # a real bug: the generic 500 below, logged
            return _bug(exc)
        log.error("database connection dropped: %s", str(exc).splitlines()[0])
        return error_response(
            503, "database_unavailable", "the database connection was reset; try again", headers={"Retry-After": "1"}
        )

    @app.errorhandler(Exception)
    def _bug(exc: Exception) -> ResponseReturnValue:
        if isinstance(exc, HTTPException):  # reached only outside smorest's handler
            return error_response(exc.code or 500, _CODES.get(exc.code or 500, "error"), exc.description or "")
        log.exception("unhandled error")
        return error_response(500, "internal", "internal error; see the server log")
