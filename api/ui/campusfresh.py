"""Keep a campus console session's group membership fresh, or end the session.

A sign-in proves the person's groups until the ID token's ``exp`` + the membership grace
(``viplanes.domain.memberships``); lanes under a group grant live only that long unless a newer
token renews the evidence. So while a campus session is used (any console page, including the
lanes table's 3-second poll), this module trades the refresh token the provider gave at sign-in
for a new ID token once the current one is near its end, server-side, and applies it as the API
applies an access token: the groups renew the evidence, a group gone ends its lanes at once, a
role gone or a refused refresh (account disabled, session ended at the provider) ends the console
session. A console left closed stops refreshing: its group lanes end within the stated bound.

The refresh token rides in its own cookie ``vl_rt``, **encrypted** (Fernet, AES-128-CBC +
HMAC-SHA256, key derived from ``VIPLANES_UI_SECRET``), not merely signed: it is a credential at
the provider, and a copy of the cookie (browser profile, a proxy's log) must not reveal it. It is
bound to the session's (principal, issuer, subject): moved into another person's session it is
not used.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass, replace
from typing import Any, Literal

from cryptography.fernet import Fernet, InvalidToken
from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from viplanes.authz.oidc import OidcRefused
from viplanes.authz.oidcclaims import identity_of
from viplanes.store.identities import caller_for_identity

from .campusclient import CampusClient, CampusRefused
from .session import COOKIE, UiSession
from .web import OPEN_ENDPOINTS, bp, cookie_args, ctx, ui_state

log = logging.getLogger(__name__)
RT_COOKIE = "vl_rt"
IDT_COOKIE = "vl_idt"
MAX_RT_COOKIE = 3800  # a browser keeps ~4 KB a cookie; a longer one is not stored (no refresh)
NO_REFRESH = OPEN_ENDPOINTS | {"ui.sign_out"}  # signing out must reach the provider's end-session call
REFRESH_AHEAD_S = 60.0  # refresh this long before the ID token's exp (half its life if shorter)


@dataclass(frozen=True)
class Held:
    """What the ``vl_rt`` cookie holds, once decrypted and matched to the session."""

    refresh_token: str
    refresh_at: float  # unix seconds: refresh on the first request at or after this


def refresh_at(claims: dict[str, Any], now: float) -> float:
    """When to renew an ID token with these claims: before its evidence runs out."""
    exp = float(claims["exp"])
    iat = claims.get("iat")
    life = exp - (float(iat) if isinstance(iat, int | float) else now)
    return exp - min(REFRESH_AHEAD_S, max(0.0, life / 2))


Freshness = Literal["keep", "refresh", "must_refresh", "end"]


def freshness(now: float, evidence_until: float, refresh_due_at: float | None) -> Freshness:
    """What a campus session needs on this request. ``refresh_due_at`` is None without a usable
    refresh token. Inside the evidence: ``keep``, or ``refresh`` when due (an unreachable provider
    then keeps the session until the evidence runs out). Past it: ``must_refresh`` (any failure
    ends the session) or, with nothing to refresh with, ``end``."""
    if now >= evidence_until:
        return "end" if refresh_due_at is None else "must_refresh"
    if refresh_due_at is not None and now >= refresh_due_at:
        return "refresh"
    return "keep"


def evidence_until(claims: dict[str, Any], campus: CampusClient) -> float:
    """Until when an ID token with these claims proves the person's role: its exp + the grace."""
    return float(claims["exp"]) + campus.oidc.membership_grace_s


class RefreshBox:
    """Seal and open ``vl_rt``: encrypted with a key from the server secret, bound to one identity."""

    def __init__(self, secret: bytes, ttl_s: int) -> None:
        key = hashlib.sha256(b"viplanes-ui-refresh-token\n" + secret).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(key))
        self.ttl_s = ttl_s

    def seal(self, pid: int, issuer: str, subject: str, held: Held) -> str:
        body = {"p": pid, "i": issuer, "s": subject, "r": held.refresh_token, "a": held.refresh_at}
        return self._fernet.encrypt(json.dumps(body).encode()).decode()

    def open(self, raw: str | None, pid: int, issuer: str, subject: str) -> Held | None:
        """The refresh token of this very identity, else None (absent, forged, too old, another's)."""
        if not raw or len(raw) > MAX_RT_COOKIE:
            return None
        try:
            body = json.loads(self._fernet.decrypt(raw.encode(), ttl=self.ttl_s))
        except (InvalidToken, ValueError):
            return None
        if not isinstance(body, dict) or (body.get("p"), body.get("i"), body.get("s")) != (pid, issuer, subject):
            return None
        if not isinstance(body.get("r"), str) or not isinstance(body.get("a"), int | float):
            return None
        return Held(body["r"], float(body["a"]))


def box() -> RefreshBox:
    sessions = ui_state().sessions
    return RefreshBox(sessions.secret, sessions.ttl_s)


def held_cookie(
    pid: int, campus: CampusClient, subject: str, refresh_token: str | None, claims: dict[str, Any], now: float
) -> str | None:
    """The ``vl_rt`` value for a fresh ID token, or None (no refresh token, or too long for a cookie)."""
    if refresh_token is None:
        return None
    sealed = box().seal(pid, campus.oidc.issuer, subject, Held(refresh_token, refresh_at(claims, now)))
    if len(sealed) > MAX_RT_COOKIE:
        log.warning("the provider's refresh token is too long for a cookie: group lanes follow the ID token's expiry")
        return None
    return sealed


def _ended(code: str, message: str) -> ResponseReturnValue:
    """The campus session ends: its cookies go, the person signs in again."""
    log.info("campus console session of %s ended: %s (%s)", g.ui.caller.name, code, message)
    nxt = request.full_path.rstrip("?") if request.method == "GET" and request.endpoint != "ui.lane_rows" else None
    resp = redirect(url_for("ui.sign_in", next=nxt, expired=1))
    for name in (COOKIE, RT_COOKIE, IDT_COOKIE):
        resp.delete_cookie(name, path="/ui")
    return resp


@bp.before_request
def _keep_fresh() -> ResponseReturnValue | None:
    """Runs after ``web._gate`` (registered later), so ``g.ui`` is the verified session."""
    if request.endpoint in NO_REFRESH:
        return None
    session: UiSession = g.ui
    if session.subject is None:
        return None
    campus = ui_state().campus
    c = ctx()
    now = c.clock()
    held = None
    if campus is not None:
        held = box().open(request.cookies.get(RT_COOKIE), session.caller.id, campus.oidc.issuer, session.subject)
    verdict = freshness(now, session.evidence_until or 0.0, None if held is None else held.refresh_at)
    if verdict == "keep":
        return None
    if verdict == "end" or campus is None or held is None:
        return _ended("sign_in_expired", "the provider's evidence of the role ran out and there is no refresh")
    try:
        claims, rotated = campus.refresh(held.refresh_token, session.subject)
    except CampusRefused as exc:
        if exc.status == 503 and verdict == "refresh":  # unreachable: try again next request, until the evidence ends
            log.warning("campus session of %s not renewed: %s", session.caller.name, exc.message)
            return None
        return _ended(exc.code, exc.message)
    assert c.oidc is not None  # a campus session exists only with the provider configured
    c.oidc.renew_groups(c.db, claims, now)  # a group gone ends its lanes here and now
    try:
        ident = identity_of(claims, campus.oidc)
    except OidcRefused as exc:  # e.g. removed from the only group that gave a role
        return _ended(exc.code, exc.message)
    with c.db.write() as s:
        who = caller_for_identity(s, ident, now)
    if who is None:
        return _ended("principal_disabled", f"{ident.name!r} is disabled here")
    g.ui = replace(session, caller=who, evidence_until=evidence_until(claims, campus))
    g.campus_rt = held_cookie(who.id, campus, session.subject, rotated, claims, now)
    g.campus_session = ui_state().sessions.identity_cookie(g.ui, campus.oidc.issuer)
    return None


@bp.after_request
def _store_refreshed(resp: Response) -> Response:
    sealed = g.get("campus_rt")
    if sealed is not None:
        resp.set_cookie(RT_COOKIE, sealed, **cookie_args(ui_state().sessions.ttl_s))
    renewed = g.get("campus_session")
    if renewed is not None and not any(c.startswith(f"{COOKIE}=") for c in resp.headers.getlist("Set-Cookie")):
        left = max(0, int(g.ui.expires_at - ctx().clock()))
        resp.set_cookie(COOKIE, renewed, **cookie_args(left))
    return resp
