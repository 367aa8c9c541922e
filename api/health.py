"""/readyz: may this server take lane requests now? Open like /healthz (which stays liveness), so
it says only that and counts: ready or not, the database ok or failing, how many switches and
links are usable. Which switch, link or refusal, and why, is for operators:
``/api/v1/readiness`` (an operator's token; `viplanes doctor --token`) answers the whole report
with the same status code. Before, anyone who reached the port read switch and link names,
datapath ids, refusal causes and the database's own error text.

Ready means the database answers and every switch of the topology is connected and reconciled
since its latest connect (``Dataplane.readiness``). Until then it answers 503 with Retry-After,
and so does a lane request whose own switches are not ready (the lane manager's
``switches_not_ready``), so a restarted server never answers 201 with a lane it could not install.

"The database answers" includes "it takes writes": a read-only file or mount, a full disk, a
PostgreSQL standby or read-only transactions make it 503 with ``database_writes`` saying why
(``viplanes/store/writeprobe.py``: a rolled-back write, cached for two seconds per process);
the key is absent while writes work.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from viplanes.domain.switchfacts import SwitchFacts, learned_features
from viplanes.lanes.refusals import NOT_READY_RETRY_S
from viplanes.store.writeprobe import OK, WriteProbe

from .auth import require

bp = Blueprint("health", __name__)
_PROBE_KEY = "viplanes.writeprobe"
_probe_lock = threading.Lock()


def write_probe() -> WriteProbe:
    """This app's probe, made on first use (one per app: its cache is the app's)."""
    probe = current_app.extensions.get(_PROBE_KEY)
    if probe is None:
        with _probe_lock:
            probe = current_app.extensions.get(_PROBE_KEY)
            if probe is None:
                probe = current_app.extensions[_PROBE_KEY] = WriteProbe(current_app.extensions["viplanes"].db)
    return probe


def readiness_report() -> dict[str, Any]:
    """The whole report: database, write probe, every switch and link, refusals, features."""
    ctx = current_app.extensions["viplanes"]
    report: dict[str, Any] = {}
    try:
        with ctx.db.read() as s:
            s.connection().exec_driver_sql("SELECT 1")
        report["database"] = "ok"
    except Exception as exc:
        report["database"] = str(exc).splitlines()[0][:200]
    if report["database"] == "ok" and (writes := write_probe().check()) != OK:
        report["database_writes"] = writes  # named only when refused: the ready body stays as it was
    try:
        plane = ctx.dataplane.readiness()
    except Exception as exc:
        plane = {"ready": False, "switches": [], "error": str(exc)[:200]}
    _add_learned_features(plane, ctx.dataplane.switch_facts())
    ready = report["database"] == "ok" and "database_writes" not in report and bool(plane.get("ready"))
    return {"status": "ready" if ready else "not_ready", **report, **plane, "ready": ready}


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What anyone may read of ``report``: the verdict and counts, no name, address or error text."""
    switches = [sw for sw in report.get("switches", []) if isinstance(sw, dict)]
    database_ok = report.get("database") == "ok" and "database_writes" not in report
    out: dict[str, Any] = {
        "status": report["status"],
        "ready": report["ready"],
        "database": "ok" if database_ok else "failing",
        "switches_ready": sum(1 for sw in switches if sw.get("connected") and sw.get("reconciled")),
        "switches_total": len(switches),
    }
    links = [link for link in report.get("links", []) if isinstance(link, dict)]
    if links:
        out["links_usable"] = sum(1 for link in links if link.get("state") == "up")
        out["links_total"] = len(links)
    out["detail"] = "/api/v1/readiness (an operator's token)"
    return out


def _answer(body: dict[str, Any]) -> Response:
    resp = jsonify(body)
    if not body["ready"]:
        resp.status_code = 503
        resp.headers["Retry-After"] = str(NOT_READY_RETRY_S)
    return resp


@bp.route("/readyz")
def readyz() -> Any:
    return _answer(summary(readiness_report()))


@bp.route("/api/v1/readiness")
def readiness() -> Any:
    """The whole report, for operators (the API's before-request hook has checked the token)."""
    require("readiness.read")
    return _answer(readiness_report())


def _add_learned_features(plane: dict[str, Any], facts: Mapping[str, SwitchFacts]) -> None:
    """Each switch's own answers (TABLE_FEATURES, METER_FEATURES) beside its readiness, so
    `viplanes doctor` can hold the topology's profile against what the switch says."""
    for sw in plane.get("switches", []):
        known = facts.get(sw.get("name", "")) if isinstance(sw, dict) else None
        if known is not None and (features := learned_features(known)):
            sw["features"] = features
