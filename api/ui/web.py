"""The console blueprint's plumbing: sign-in gate, CSRF check, error pages, security headers."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, g, make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from viplanes.authz.tokens import Caller, may
from viplanes.errors import Forbidden, VipError

from ..context import AppContext, app_context
from .forms import field_messages
from .session import COOKIE, PRE_COOKIE, Sessions, UiSession, same_secret

if TYPE_CHECKING:
    from .campusclient import CampusClient

log = logging.getLogger(__name__)
bp = Blueprint(
    "ui", __name__, url_prefix="/ui", template_folder="templates", static_folder="static", static_url_path="/static"
)

OPEN_ENDPOINTS = {"ui.sign_in", "ui.static", "ui.campus_start", "ui.campus_callback", "ui.campus_sign_out"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass
class UiState:
    """Per-app console state: the session issuer and the last counter readings (for rates)."""

    sessions: Sessions
    campus: CampusClient | None = None  # "Sign in with <campus>" when configured (campus.py)
    # lane id -> (older reading, newest reading), each (time, bytes)
    last_bytes: dict[int, tuple[Any, Any]] = field(default_factory=dict)


def ui_state() -> UiState:
    return current_app.extensions["viplanes_ui"]


def ctx() -> AppContext:
    return app_context()


def caller() -> Caller:
    return g.ui.caller


def need(action: str) -> Caller:
    """The caller if their role may do ``action`` (the API's rule), else a 403 page."""
    who = caller()
    if not may(who, action):
        raise Forbidden(f"{action} needs the operator role", code="forbidden")
    return who


def operator_only() -> Caller:
    who = caller()
    if not who.is_operator:
        raise Forbidden("this page is for operators", code="forbidden")
    return who


class CsrfRefused(Exception):
    """A form came without the session's CSRF token."""


def cookie_args(max_age: int | None = None) -> dict[str, Any]:
    return {"httponly": True, "samesite": "Strict", "secure": request.is_secure, "path": "/ui", "max_age": max_age}


def safe_next(target: str | None) -> str:
    """Only a path inside the console: never an open redirect."""
    if target and target.startswith("/ui/") and not target.startswith("//") and not urlsplit(target).netloc:
        return target
    return url_for("ui.home")


@bp.before_request
def _gate() -> ResponseReturnValue | None:
    if request.endpoint in OPEN_ENDPOINTS:
        return None
    session = ui_state().sessions.load(request.cookies.get(COOKIE))
    if session is None:
        nxt = request.full_path.rstrip("?") if request.method == "GET" else None
        if request.endpoint == "ui.lane_rows":  # the table's poll: come back to the page, not the rows
            nxt = url_for("ui.mine" if request.args.get("back") == "mine" else "ui.lanes")
        resp = redirect(url_for("ui.sign_in", next=nxt, expired=1 if request.cookies.get(COOKIE) else None))
        if request.cookies.get(COOKIE):
            resp.delete_cookie(COOKIE, path="/ui")
        return resp
    g.ui = session
    if request.method == "POST" and not same_secret(request.form.get("csrf"), session.csrf):
        raise CsrfRefused()
    return None


@bp.after_request
def _headers(resp: Response) -> Response:
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Frame-Options"] = "DENY"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "same-origin"
    if request.endpoint != "ui.static":
        resp.headers["Cache-Control"] = "no-store"
    return resp


@bp.app_context_processor
def _template_globals() -> dict[str, Any]:
    ui: UiSession | None = g.get("ui")
    return {
        "me": ui.caller if ui else None,
        "csrf_token": ui.csrf if ui else "",
        "session_expires": ui.expires_at if ui else None,
    }


def error_page(status: int, code: str, message: str, details: Any = None) -> ResponseReturnValue:
    details = details or {}
    fields = details.get("fields") if isinstance(details, dict) else None
    readable = field_messages(fields, {}) if isinstance(fields, dict) else {}
    other = {k: _plain(v) for k, v in details.items() if k != "fields"} if isinstance(details, dict) else {}
    page = render_template(
        "ui/error.html", status=status, code=code, message=message, fields=readable, other=other, back=_came_from()
    )
    return page, status


def _plain(value: Any) -> str:
    """A detail as words: lists joined, nothing of Python's repr (no brackets, no quotes)."""
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    return str(value)


def _came_from() -> str | None:
    """The console page that led here (same origin, under /ui/), for a "return" link."""
    ref = urlsplit(request.referrer or "")
    if ref.scheme not in ("http", "https") or ref.netloc != request.host or not ref.path.startswith("/ui/"):
        return None
    return ref.path + (f"?{ref.query}" if ref.query else "")


@bp.errorhandler(VipError)
def _vip_error(exc: VipError) -> ResponseReturnValue:
    return error_page(exc.status, exc.code, exc.message, exc.details)


@bp.errorhandler(CsrfRefused)
def _csrf(_exc: CsrfRefused) -> ResponseReturnValue:
    return error_page(
        400,
        "csrf_refused",
        "This form is stale or did not come from this console "
        "(missing or wrong CSRF token). Reload the page and submit it again.",
    )


@bp.errorhandler(HTTPException)
def _http(exc: HTTPException) -> ResponseReturnValue:
    return error_page(exc.code or 500, exc.name.lower().replace(" ", "_"), exc.description or exc.name)


@bp.errorhandler(OperationalError)
def _db_down(exc: OperationalError) -> ResponseReturnValue:
    log.error("database unavailable: %s", str(exc).splitlines()[0])
    return error_page(503, "database_unavailable", "The database is unavailable; try again in a few seconds.")


@bp.errorhandler(Exception)
def _bug(exc: Exception) -> ResponseReturnValue:
    if isinstance(exc, HTTPException):
        return _http(exc)
    log.exception("console error")
    return error_page(500, "internal", "Internal error; see the server log.")


# --- sign-in and sign-out --------------------------------------------------------------------


@bp.route("/login", methods=["GET", "POST"], endpoint="sign_in")
def sign_in() -> ResponseReturnValue:
    nxt = request.values.get("next")
    if request.method == "GET":
        pre = secrets.token_urlsafe(24)
        resp = make_response(
            render_template(
                "ui/login.html",
                pre=pre,
                next=nxt,
                error=None,
                expired=bool(request.args.get("expired")),
                campus=_campus_name(),
            )
        )
        resp.set_cookie(PRE_COOKIE, pre, **cookie_args(600))
        return resp
    if not same_secret(request.form.get("csrf"), request.cookies.get(PRE_COOKIE, "")):
        raise CsrfRefused()
    c = ctx()
    issued = ui_state().sessions.issue(request.form.get("token", "").strip())
    if issued is None:  # like the API: a valid token is always served, failures are budgeted
        client = request.remote_addr or "unknown"
        c.metrics.auth_failures.inc()
        wait = c.limiter.retry_after(client)
        if wait <= 0:
            c.limiter.record_failure(client)
        message = (
            f"Too many failed sign-ins; wait {int(wait) + 1} s."
            if wait > 0
            else "That token is unknown, rotated or belongs to a disabled principal."
        )
        pre = secrets.token_urlsafe(24)
        resp = make_response(
            render_template("ui/login.html", pre=pre, next=nxt, error=message, expired=False, campus=_campus_name()),
            429 if wait > 0 else 401,
        )
        resp.set_cookie(PRE_COOKIE, pre, **cookie_args(600))
        return resp
    value, session = issued
    signed_in = redirect(safe_next(nxt))
    signed_in.set_cookie(COOKIE, value, **cookie_args(ui_state().sessions.ttl_s))
    signed_in.delete_cookie(PRE_COOKIE, path="/ui")
    return signed_in


def _campus_name() -> str | None:
    campus = ui_state().campus
    return campus.display_name if campus is not None else None


@bp.route("/", endpoint="home")
def home() -> ResponseReturnValue:
    return redirect(url_for("ui.lanes" if caller().is_operator else "ui.mine"))


# --- template filters -------------------------------------------------------------------------


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


@bp.app_template_filter("isotime")
def _isotime(ts: float) -> str:
    return _utc(ts).isoformat(timespec="seconds").replace("+00:00", "Z")


@bp.app_template_filter("isotime_short")
def _isotime_short(ts: float) -> str:
    return _utc(ts).strftime("%Y-%m-%d %H:%M:%S UTC")


@bp.app_template_filter("localinput")
def _localinput(ts: float) -> str:
    return _utc(ts).strftime("%Y-%m-%dT%H:%M")


@bp.app_template_filter("duration")
def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h {m:02d}m {sec:02d}s" if h else f"{m}m {sec:02d}s"


@bp.app_template_filter("span")
def _span(seconds: float) -> str:
    """A grant's longest duration as people say it: 45 s, 60 min, 1 h 30 min, 2 d."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s % 60:
        return f"{s // 60} min {s % 60} s"
    m = s // 60
    if m <= 90 or m % 60:
        return f"{m} min" if m <= 90 else f"{m // 60} h {m % 60} min"
    h = m // 60
    return f"{h // 24} d" if h % 24 == 0 else f"{h} h"


@bp.app_template_filter("bytes")
def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


@bp.app_template_filter("rate")
def _rate(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.1f} {unit}"
    return f"{bps:.0f} bit/s"
