"""Bearer-token authentication for /api/v1 and role checks for views."""

from __future__ import annotations

import math
import time
from typing import Any

from flask import Flask, g, request
from flask.typing import ResponseReturnValue

from viplanes.authz.oidc import MAX_JWT_LEN, OidcRefused, looks_like_jwt
from viplanes.authz.tokencache import TOKENS
from viplanes.authz.tokens import Caller, may, parse_bearer
from viplanes.errors import Forbidden
from viplanes.store.records import caller_for_token

from .errors import error_response

PUBLIC = {"/api/v1/openapi.json"}


def register(app: Flask) -> None:
    @app.before_request
    def _authenticate() -> ResponseReturnValue | None:
        path = request.path
        if not path.startswith("/api/v1/") or path in PUBLIC:
            return None
        ctx = app.extensions["viplanes"]
        token = parse_bearer(request.headers.get("Authorization"), max_len=MAX_JWT_LEN)
        caller = None
        refused: OidcRefused | None = None
        if token is not None and ctx.oidc is not None and looks_like_jwt(token):
            try:  # the campus provider's access token (docs/identity.md)
                caller = ctx.oidc.caller(ctx.db, token, time.time())
            except OidcRefused as exc:
                if exc.status != 401:  # a valid token of a person with no role here, or the issuer down
                    return error_response(exc.status, exc.code, exc.message)
                refused = exc
        elif token is not None and len(token) <= 256:  # a valid token is always checked first and always served
            caller = TOKENS.lookup(ctx.db.url, token, lambda: _load_caller(ctx.db, token))
        if caller is None:
            client = request.remote_addr or "unknown"
            ctx.metrics.auth_failures.inc()
            wait = ctx.limiter.retry_after(client)
            if wait > 0:
                return error_response(
                    429,
                    "rate_limited",
                    "too many failed authentications; wait",
                    {"retry_after_s": math.ceil(wait)},
                    {"Retry-After": str(math.ceil(wait))},
                )
            ctx.limiter.record_failure(client)
            if refused is not None:
                return error_response(
                    401,
                    refused.code,
                    refused.message,
                    {},
                    {
                        "WWW-Authenticate": f'Bearer realm="viplanes", error="invalid_token", error_description="{refused.code}"'
                    },
                )
            return error_response(
                401,
                "unauthorized",
                "missing, unknown or disabled bearer token",
                {},
                {"WWW-Authenticate": 'Bearer realm="viplanes"'},
            )
        g.caller = caller
        return None


def _load_caller(db: Any, token: str) -> Caller | None:
    with db.read() as s:
        return caller_for_token(s, token)


def caller() -> Caller:
    return g.caller


def require(action: str) -> Caller:
    c = caller()
    if not may(c, action):
        raise Forbidden(f"{action} needs the operator role", code="forbidden")
    return c
