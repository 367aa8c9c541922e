"""Console sessions: an API token exchanged for a signed cookie, and CSRF tokens for forms.

The cookie holds the id of the API token used to sign in, an expiry and a CSRF secret, signed
with a key derived from the server secret *and that token's stored hash*. So a session:

- works in every API process that shares the database and ``VIPLANES_UI_SECRET``;
- ends at its expiry (checked against the server's clock, not the browser's);
- ends at once when the token is rotated (the row and its hash are gone: no key verifies it)
  or the principal is disabled (checked on every request, like a bearer token).

Sign-out deletes the cookie; a copy taken before sign-out stays valid until its expiry, the
price of keeping no session table (documented in the README).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import select

from viplanes.authz.tokens import Caller, hash_token
from viplanes.domain.values import is_decimal
from viplanes.store.models import ApiToken, Principal

log = logging.getLogger(__name__)

COOKIE = "vl_session"
PRE_COOKIE = "vl_presign"  # CSRF secret of the sign-in form, before there is a session
SALT = "viplanes-ui-session"


@dataclass(frozen=True)
class UiSession:
    caller: Caller
    csrf: str
    expires_at: float


class Sessions:
    """Issue and check session cookies; ``clock`` is the app's injectable clock."""

    def __init__(self, db: Any, secret: bytes, ttl_s: int, clock: Callable[[], float]) -> None:
        self.db = db
        self.secret = secret
        self.ttl_s = ttl_s
        self.clock = clock

    def _signer(self, token_hash: str) -> URLSafeSerializer:
        key = hmac.new(self.secret, token_hash.encode(), hashlib.sha256).hexdigest()
        return URLSafeSerializer(key, salt=SALT)

    def _row(self, where: Any) -> Any:
        with self.db.read() as s:
            return s.execute(
                select(ApiToken.id, ApiToken.token_hash, Principal.id.label("pid"), Principal.name, Principal.role)
                .join(Principal, ApiToken.principal_id == Principal.id)
                .where(where, Principal.disabled.is_(False))
            ).first()

    def issue(self, token: str) -> tuple[str, UiSession] | None:
        """The cookie value and session for a valid token of an enabled principal, else None."""
        if not token or len(token) > 256:
            return None
        row = self._row(ApiToken.token_hash == hash_token(token))
        if row is None:
            return None
        session = UiSession(Caller(row.pid, row.name, row.role), secrets.token_urlsafe(24), self.clock() + self.ttl_s)
        payload = {"exp": session.expires_at, "c": session.csrf}
        return f"{row.id}.{self._signer(row.token_hash).dumps(payload)}", session

    def load(self, cookie: str | None) -> UiSession | None:
        """The live session in ``cookie``, or None (absent, forged, expired, rotated, disabled)."""
        if not cookie or len(cookie) > 1024:
            return None
        tid, _, signed = cookie.partition(".")
        if not is_decimal(tid) or len(tid) > 12:
            return None
        row = self._row(ApiToken.id == int(tid))
        if row is None:
            return None
        try:
            payload = self._signer(row.token_hash).loads(signed)
        except BadSignature:
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("exp"), (int, float)):
            return None
        if payload["exp"] <= self.clock():
            return None
        return UiSession(Caller(row.pid, row.name, row.role), str(payload.get("c", "")), payload["exp"])


def same_secret(given: str | None, expected: str) -> bool:
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def server_secret(configured: str | None) -> bytes:
    """The signing secret; without ``VIPLANES_UI_SECRET`` sessions last only as long as this process."""
    if configured:
        return configured.encode()
    log.warning(
        "VIPLANES_UI_SECRET is not set: console sessions are valid only in this process and end when it restarts"
    )
    return secrets.token_bytes(32)
