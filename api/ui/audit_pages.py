"""The audit log with filters (actor, action, lane, time range) and a CSV export (operators)."""

from __future__ import annotations

import csv
import io
from typing import Any

from flask import Response, render_template, request
from flask.typing import ResponseReturnValue

from viplanes.domain.values import is_decimal
from viplanes.errors import Invalid
from viplanes.store import records as store

from ..schemas import AuditQuerySchema
from ..values import from_ts, to_ts
from .forms import as_datetime, csv_safe, load
from .web import bp, ctx, need

PAGE = 200
CSV_ROWS = 10_000


def _query(limit: int) -> tuple[dict[str, str], list[Any]]:
    a = request.args
    lane = (a.get("lane") or "").strip()
    if lane and not is_decimal(lane):
        raise Invalid(f"lane: a lane number is needed, got {lane!r}", code="invalid_form")
    args = load(
        AuditQuerySchema(),
        {
            "actor": a.get("actor") or None,
            "action": a.get("action") or None,
            "decision": a.get("decision") or None,
            "target": f"lane:{lane}" if lane else None,
            "since": as_datetime(a.get("since")),
            "until": as_datetime(a.get("until")),
        },
    )
    args["limit"] = limit
    for key in ("since", "until"):
        if key in args:
            args[key] = to_ts(args[key])
    with ctx().db.read() as s:
        events = list(store.query_audit(s, **args))
    return {k: (a.get(k) or "") for k in ("actor", "action", "decision", "lane", "since", "until")}, events


@bp.route("/audit", endpoint="audit")
def audit_page() -> ResponseReturnValue:
    need("audit.read")
    filters, events = _query(PAGE)
    return render_template("ui/audit.html", filters=filters, events=events, page=PAGE)


@bp.route("/audit.csv", endpoint="audit_csv")
def audit_csv() -> ResponseReturnValue:
    need("audit.read")
    _, events = _query(CSV_ROWS)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["id", "at", "actor", "action", "target", "decision", "reason"])
    for e in events:
        w.writerow(
            [csv_safe(x) for x in (e.id, from_ts(e.at).isoformat(), e.actor, e.action, e.target, e.decision, e.reason)]
        )
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": 'attachment; filename="viplanes-audit.csv"'},
    )
