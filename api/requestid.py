"""A request id for every API request, in the response's X-Request-ID and in every log line.

An incoming X-Request-ID (a proxy's, a client's retry) is kept when well formed, so one id
follows a request from the reverse proxy's access log into ours; anything else is replaced,
never echoed: a header with a newline or 10 kB would otherwise forge or flood log lines. The
id, and the principal once authenticated, live in context variables (``viplanes.logs``) that
the log filter copies onto every record the request's thread writes.
"""

from __future__ import annotations

from flask import Flask, Response, g, request

from viplanes.logs import acceptable_request_id, lane_id_var, new_request_id, principal_var, request_id_var

HEADER = "X-Request-ID"


def register(app: Flask) -> None:
    """Call before any hook that may log or answer early (auth's 401 carries the id too)."""

    @app.before_request
    def _assign() -> None:
        rid = acceptable_request_id(request.headers.get(HEADER)) or new_request_id()
        g.request_id = rid
        request_id_var.set(rid)
        # the API server (cheroot) reuses its threads: a value left by the previous request must not leak
        principal_var.set(None)
        lane_id_var.set(None)

    @app.after_request
    def _echo(resp: Response) -> Response:
        rid = g.get("request_id")
        if rid is not None:
            resp.headers[HEADER] = rid
        return resp

    @app.teardown_request
    def _clear(_exc: BaseException | None) -> None:
        request_id_var.set(None)
        principal_var.set(None)
        lane_id_var.set(None)


def register_principal(app: Flask) -> None:
    """Call after ``auth.register``: its hook has set ``g.caller`` by the time this one runs."""

    @app.before_request
    def _principal() -> None:
        caller = g.get("caller")
        if caller is not None:
            principal_var.set(caller.name)
