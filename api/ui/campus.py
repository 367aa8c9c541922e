"""Console sign-in at the campus identity provider, and sign-out.

``/ui/login/campus`` starts a sign-in (``campusclient.CampusClient.start``) and sends the browser
to the provider; ``/ui/login/callback`` finishes it, creates or updates the person's principal
(``store.identities``, roles from the groups claim as the API does) and issues a session bound to
the ID token's subject. Every refusal is a page with a 4xx naming why, never a 500.

Cookies: the transaction (state, nonce, PKCE verifier) rides in ``vl_oidc``, signed, 10 minutes,
``SameSite=Lax`` (the provider's redirect back is a cross-site navigation, which ``Strict`` would
strip). The session cookie stays ``Strict``; so the callback answers with a page that moves on by
itself (a same-site navigation that carries it) rather than a redirect in the cross-site chain.
The ID token rides in ``vl_idt`` (Strict) only as the ``id_token_hint`` of sign-out.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any
from urllib.parse import urlsplit

from flask import g, make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from itsdangerous import BadSignature, URLSafeTimedSerializer

from viplanes.authz.oidc import OidcRefused
from viplanes.authz.oidcclaims import identity_of
from viplanes.store.identities import caller_for_identity

from .campusclient import TRANSACTION_S, CampusClient, CampusRefused, Transaction
from .campusfresh import IDT_COOKIE, RT_COOKIE, evidence_until, held_cookie
from .session import COOKIE, PRE_COOKIE
from .web import bp, cookie_args, ctx, error_page, safe_next, ui_state

log = logging.getLogger(__name__)
TX_COOKIE = "vl_oidc"
TX_SALT = "viplanes-ui-oidc-transaction"
MAX_ID_TOKEN_COOKIE = 3800  # a browser keeps ~4 KB a cookie; a longer hint is dropped, not broken
FRESH_LOGIN_COOKIE = "vl_fresh"  # set by a refused person's sign-out: the next sign-in asks prompt=login


def _campus() -> CampusClient:
    found = ui_state().campus
    if found is None:
        raise CampusRefused("campus_sign_in_off", "Sign-in at the campus provider is not configured here.", 404)
    return found


def _tx_serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(ui_state().sessions.secret, salt=TX_SALT)


def _redirect_uri(campus: CampusClient) -> str:
    return campus.console.redirect_uri or url_for("ui.campus_callback", _external=True)


def _post_logout_uri(campus: CampusClient) -> str:
    if campus.console.redirect_uri:
        parts = urlsplit(campus.console.redirect_uri)
        return f"{parts.scheme}://{parts.netloc}{url_for('ui.sign_in')}"
    return url_for("ui.sign_in", _external=True)


def _refused(exc: CampusRefused) -> ResponseReturnValue:
    log.info("campus sign-in refused: %s (%s)", exc.code, exc.message)
    resp = make_response(error_page(exc.status, exc.code, exc.message))
    resp.delete_cookie(TX_COOKIE, path="/ui")
    return resp


@bp.route("/login/campus", endpoint="campus_start")
def campus_start() -> ResponseReturnValue:
    fresh = request.args.get("prompt") == "login" or request.cookies.get(FRESH_LOGIN_COOKIE) == "1"
    try:
        campus = _campus()
        url, tx = campus.start(_redirect_uri(campus), request.args.get("next"), fresh_login=fresh)
    except CampusRefused as exc:
        return _refused(exc)
    resp = redirect(url)
    resp.delete_cookie(FRESH_LOGIN_COOKIE, path="/ui")
    args = cookie_args(TRANSACTION_S) | {"samesite": "Lax"}
    resp.set_cookie(TX_COOKIE, _tx_serializer().dumps(tx.as_dict()), **args)
    return resp


def _transaction() -> Transaction | None:
    raw = request.cookies.get(TX_COOKIE)
    if not raw or len(raw) > 2048:
        return None
    try:
        return Transaction.from_dict(_tx_serializer().loads(raw, max_age=TRANSACTION_S))
    except BadSignature:
        return None


@bp.route("/login/callback", endpoint="campus_callback")
def campus_callback() -> ResponseReturnValue:
    c = ctx()
    try:
        campus = _campus()
        tx = _transaction()
        claims, id_token, refresh_token = campus.finish(
            tx, {k: v for k, v in request.args.items() if isinstance(v, str)}
        )
        now = c.clock()
        try:
            ident = identity_of(claims, campus.oidc)
        except OidcRefused as exc:
            _record_groups(claims, now)  # removed from their only mapped group: its lanes end too
            return _unmapped(campus, exc, claims, id_token)
        with c.db.write() as s:
            who = caller_for_identity(s, ident, now)
        until = evidence_until(claims, campus)  # the session lives on this evidence (campusfresh)
        issued = (
            None if who is None else ui_state().sessions.issue_for_identity(who.id, ident.issuer, ident.subject, until)
        )
        if issued is None:
            raise CampusRefused("principal_disabled", f"{ident.name!r} is disabled in VIP Lanes; ask an operator.", 403)
        _record_groups(claims, now)
    except CampusRefused as exc:
        return _refused(exc)
    assert tx is not None  # finish refused a missing transaction
    value, session = issued
    sealed = held_cookie(session.caller.id, campus, ident.subject, refresh_token, claims, now)
    target = safe_next(tx.next)
    resp = make_response(render_template("ui/signed_in.html", target=target))
    resp.set_cookie(COOKIE, value, **cookie_args(ui_state().sessions.ttl_s))
    if len(id_token) <= MAX_ID_TOKEN_COOKIE:
        resp.set_cookie(IDT_COOKIE, id_token, **cookie_args(ui_state().sessions.ttl_s))
    if sealed is not None:
        resp.set_cookie(RT_COOKIE, sealed, **cookie_args(ui_state().sessions.ttl_s))
    resp.delete_cookie(TX_COOKIE, path="/ui")
    return resp


def _unmapped(campus: CampusClient, exc: OidcRefused, claims: dict[str, Any], id_token: str) -> ResponseReturnValue:
    """The provider signed the person in, VIP Lanes refuses them (e.g. ``no_role``): a page that
    says why and offers the way out, sign-out here and at the provider (``campusout.py``),
    since the provider's session would otherwise sign the same account straight back in."""
    log.info("campus sign-in refused: %s (%s)", exc.code, exc.message)
    pre = secrets.token_urlsafe(24)
    who = claims.get("preferred_username") or claims.get("email") or ""
    page = render_template(
        "ui/no_role.html",
        status=exc.status,
        code=exc.code,
        message=exc.message,
        campus=campus.display_name,
        who=who,
        pre=pre,
    )
    resp = make_response(page, exc.status)
    resp.set_cookie(PRE_COOKIE, pre, **cookie_args(TRANSACTION_S))
    if len(id_token) <= MAX_ID_TOKEN_COOKIE:  # the id_token_hint of the provider's sign-out
        resp.set_cookie(IDT_COOKIE, id_token, **cookie_args(TRANSACTION_S))
    resp.delete_cookie(TX_COOKIE, path="/ui")
    return resp


def _record_groups(claims: dict[str, Any], now: float) -> None:
    """The ID token's groups are membership evidence, as an access token's are at the API
    (renewed to its ``exp`` + grace; a group missing ends that group's lanes; an older token
    changes nothing)."""
    oidc = ctx().oidc
    if oidc is not None:
        oidc.renew_groups(ctx().db, claims, now)


@bp.route("/logout", methods=["POST"], endpoint="sign_out")
def sign_out() -> ResponseReturnValue:
    """End the local session; for a campus sign-in, end the provider's session too when its
    discovery document offers ``end_session_endpoint`` (RP-initiated logout). That leg is a page
    that moves on by itself: the console's CSP (``form-action 'self'``) stops a browser from
    following a form's redirect to another origin."""
    campus = ui_state().campus
    target = None
    if campus is not None and g.ui.subject is not None:
        target = campus.end_session_url(request.cookies.get(IDT_COOKIE), _post_logout_uri(campus))
    if target is None or campus is None:
        resp = redirect(url_for("ui.sign_in"))
    else:  # a page, not a redirect: CSP form-action 'self' forbids a form's redirect to the provider
        g.ui = None
        resp = make_response(render_template("ui/signing_out.html", target=target, campus=campus.display_name))
    for name in (COOKIE, IDT_COOKIE, RT_COOKIE):
        resp.delete_cookie(name, path="/ui")
    return resp
