"""/readyz: may this server take lane requests now? Open like /healthz (which stays liveness).

Ready means the database answers and every switch of the topology is connected and reconciled
since its latest connect (``Dataplane.readiness``). Until then it answers 503 with Retry-After,
and so does a lane request whose own switches are not ready (the lane manager's
``switches_not_ready``), so a restarted server never answers 201 with a lane it could not install.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from viplanes.lanes.manager import NOT_READY_RETRY_S

bp = Blueprint("health", __name__)


@bp.route("/readyz")
def readyz() -> Any:
    ctx = current_app.extensions["viplanes"]
    report: dict[str, Any] = {}
    try:
        with ctx.db.read() as s:
            s.connection().exec_driver_sql("SELECT 1")
        report["database"] = "ok"
    except Exception as exc:
        report["database"] = str(exc).splitlines()[0][:200]
    try:
        plane = ctx.dataplane.readiness()
    except Exception as exc:
        plane = {"ready": False, "switches": [], "error": str(exc)[:200]}
    ready = report["database"] == "ok" and bool(plane.get("ready"))
    body = {"status": "ready" if ready else "not_ready", **report, **plane, "ready": ready}
    resp = jsonify(body)
    if not ready:
        resp.status_code = 503
        resp.headers["Retry-After"] = str(NOT_READY_RETRY_S)
    return resp
