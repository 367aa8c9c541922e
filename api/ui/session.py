"""Console sessions: an API token exchanged for a signed cookie, and CSRF tokens for forms.

The cookie holds the id of the API token used to sign in, an expiry and a CSRF secret, signed
with a key derived from the server secret *and that token's stored hash*. So a session:

- works in every API process that shares the database and ``VIPLANES_UI_SECRET``;
- ends at its expiry (checked against the server's clock, not the browser's);
- ends at once when the token is rotated (the row and its hash are gone: no key verifies it)
  or the principal is disabled (checked on every request, like a bearer token).

A person who signed in at the campus provider has no API token: their cookie is
``p<principal id>.<signed>``, signed with a key derived from the server secret and the
(issuer, subject) the ID token named. It ends when the principal is disabled or that identity is
no longer linked to it, and its role is the principal's current one (the groups at the last
sign-in or API call). It also carries ``ev``, until when the provider's evidence of that role
holds (the ID token's ``exp`` + the membership grace): ``campusfresh`` renews it with the refresh
token or ends the session, so a campus session never outlives the evidence of its role, with or
without the refresh cookie.

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
from viplanes.store.models import ApiToken, Principal, PrincipalIdentity

log = logging.getLogger(__name__)

COOKIE = "vl_session"
PRE_COOKIE = "vl_presign"  # CSRF secret of the sign-in form, before there is a session
SALT = "viplanes-ui-session"


@dataclass(frozen=True)
class UiSession:
    caller: Caller
    csrf: str
    expires_at: float
    subject: str | None = None  # the provider's ``sub`` for a campus sign-in; None for a token
    evidence_until: float | None = None  # campus: the ID token's exp + grace (0: unknown); None for a token


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

    def _identity_signer(self, pid: int, issuer: str, subject: str) -> URLSafeSerializer:
        return self._signer(f"oidc\n{pid}\n{issuer}\n{subject}")

    def _identity_row(self, pid: int, issuer: str, subject: str) -> Any:
        with self.db.read() as s:
            return s.execute(
                select(Principal.id, Principal.name, Principal.role)
                .join(PrincipalIdentity, PrincipalIdentity.principal_id == Principal.id)
                .where(
                    Principal.id == pid,
                    Principal.disabled.is_(False),
                    PrincipalIdentity.issuer == issuer,
                    PrincipalIdentity.subject == subject,
                )
            ).first()

    def issue_for_identity(
        self, pid: int, issuer: str, subject: str, evidence_until: float
    ) -> tuple[str, UiSession] | None:
        """The cookie for a person the provider just signed in (their principal linked to
        (issuer, subject)), or None when that principal is disabled or not linked."""
        row = self._identity_row(pid, issuer, subject)
        if row is None:
            return None
        session = UiSession(
            Caller(row.id, row.name, row.role, from_provider=True),
            secrets.token_urlsafe(24),
            self.clock() + self.ttl_s,
            subject,
            evidence_until,
        )
        return self.identity_cookie(session, issuer), session

    def identity_cookie(self, session: UiSession, issuer: str) -> str:
        """The cookie of a campus session (its sign-in's expiry and CSRF secret kept, so a renewed
        evidence deadline does not break a form already open)."""
        assert session.subject is not None and session.evidence_until is not None
        pid, subject = session.caller.id, session.subject
        payload = {
            "exp": session.expires_at,
            "c": session.csrf,
            "i": issuer,
            "s": subject,
            "ev": session.evidence_until,
        }
        return f"p{pid}.{self._identity_signer(pid, issuer, subject).dumps(payload)}"

    def _load_identity(self, pid_text: str, signed: str) -> UiSession | None:
        if not is_decimal(pid_text) or len(pid_text) > 12:
            return None
        pid = int(pid_text)
        try:  # unverified first: the payload names the identity whose key must verify it
            _, unsafe = URLSafeSerializer(b"", salt=SALT).loads_unsafe(signed)
        except Exception:  # any garbage is just not a session
            return None
        if not isinstance(unsafe, dict) or not isinstance(unsafe.get("i"), str) or not isinstance(unsafe.get("s"), str):
            return None
        issuer, subject = unsafe["i"], unsafe["s"]
        try:
            payload = self._identity_signer(pid, issuer, subject).loads(signed)
        except BadSignature:
            return None
        if not isinstance(payload.get("exp"), (int, float)) or payload["exp"] <= self.clock():
            return None
        row = self._identity_row(pid, issuer, subject)
        if row is None:
            return None
        ev = payload.get("ev")  # a cookie from before ``ev`` existed has no evidence: renew or end
        evidence_until = float(ev) if isinstance(ev, (int, float)) else 0.0
        caller = Caller(row.id, row.name, row.role, from_provider=True)
        return UiSession(caller, str(payload.get("c", "")), payload["exp"], subject, evidence_until)

    def load(self, cookie: str | None) -> UiSession | None:
        """The live session in ``cookie``, or None (absent, forged, expired, rotated, disabled)."""
        if not cookie or len(cookie) > 1024:
            return None
        tid, _, signed = cookie.partition(".")
        if tid.startswith("p"):
            return self._load_identity(tid[1:], signed)
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
