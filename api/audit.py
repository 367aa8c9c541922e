"""/api/v1/audit: the decision log, newest first (operators)."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask_smorest import Blueprint

from viplanes.store import records as store

from .auth import require
from .schemas import AuditEventSchema, AuditQuerySchema
from .values import to_ts
from .views import audit_dict

bp = Blueprint("audit", __name__, url_prefix="/api/v1/audit", description="Audit log")


@bp.route("", methods=["GET"])
@bp.arguments(AuditQuerySchema(), location="query")
@bp.response(200, AuditEventSchema(many=True))
def query(args: dict[str, Any]) -> Any:
    require("audit.read")
    for key in ("since", "until"):
        if key in args:
            args[key] = to_ts(args[key])
    with current_app.extensions["viplanes"].db.read() as s:
        return [audit_dict(e) for e in store.query_audit(s, **args)]
