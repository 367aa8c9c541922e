"""The operator console under /ui/: server-rendered pages over the same store, lane manager and
authorization as the JSON API. Views stay thin: they parse a form, call what the API views call,
and render. Sign-in, CSRF and security headers live in ``web``; sessions in ``session``.

Modules: ``admin``, ``audit_pages``, ``campus``, ``campusclient``, ``campusfresh``, ``campusout``,
``forms``, ``lanebytes``, ``lanes_pages``, ``ops``, ``researcher``, ``session``, ``switchview``,
``web``.

Imports today: authz, controller, domain, errors, lanes, policy, store, topologies. Never
(.importlinter): click, tests, cli.
"""

from __future__ import annotations

from flask import Flask

from viplanes.settings import DEFAULTS

from .lanebytes import LaneBytes
from .session import Sessions, server_secret
from .web import UiState, bp

DEFAULT_SESSION_S = DEFAULTS.integer("VIPLANES_UI_SESSION_S")


def register(app: Flask, secret: str | None = None, session_s: int | None = None) -> None:
    """Mount the console on ``app``. ``VIPLANES_UI_SECRET`` (shared by every API process) signs
    the session cookies; ``VIPLANES_UI_SESSION_S`` sets how long a sign-in lasts (both in AppConfig)."""
    from . import admin, audit_pages, campus, campusout, lanes_pages, ops, researcher  # noqa: F401  (routes)
    from .campusclient import CampusClient

    ctx = app.extensions["viplanes"]
    if session_s is None:
        session_s = ctx.config.ui_session_s
    sessions = Sessions(ctx.db, server_secret(secret or ctx.config.ui_secret or None), session_s, ctx.clock)
    state = UiState(sessions)
    if ctx.oidc is not None and ctx.config.oidc_console is not None:  # "Sign in with <campus>"
        from viplanes.api.oidc import fetch_json

        state.campus = CampusClient(ctx.oidc.settings, ctx.config.oidc_console, fetch_json)
    app.extensions["viplanes_ui"] = state
    ctx.metrics.registry.register(LaneBytes(ctx.manager, ctx.dataplane))
    app.register_blueprint(bp)
