"""/readyz: may this server take lane requests now? Open like /healthz (which stays liveness).

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

from flask import Blueprint, current_app, jsonify

from viplanes.domain.switchfacts import SwitchFacts, learned_features
from viplanes.lanes.refusals import NOT_READY_RETRY_S
from viplanes.store.writeprobe import OK, WriteProbe

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
    if report["database"] == "ok" and (writes := write_probe().check()) != OK:
        report["database_writes"] = writes  # named only when refused: the ready body stays as it was
    try:
        plane = ctx.dataplane.readiness()
    except Exception as exc:
        plane = {"ready": False, "switches": [], "error": str(exc)[:200]}
    _add_learned_features(plane, ctx.dataplane.switch_facts())
    ready = report["database"] == "ok" and "database_writes" not in report and bool(plane.get("ready"))
    body = {"status": "ready" if ready else "not_ready", **report, **plane, "ready": ready}
    resp = jsonify(body)
    if not ready:
        resp.status_code = 503
        resp.headers["Retry-After"] = str(NOT_READY_RETRY_S)
    return resp


def _add_learned_features(plane: dict[str, Any], facts: Mapping[str, SwitchFacts]) -> None:
    """Each switch's own answers (TABLE_FEATURES, METER_FEATURES) beside its readiness, so
    `viplanes doctor` can hold the topology's profile against what the switch says."""
    for sw in plane.get("switches", []):
        known = facts.get(sw.get("name", "")) if isinstance(sw, dict) else None
        if known is not None and (features := learned_features(known)):
            sw["features"] = features
