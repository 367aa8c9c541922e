"""/api/v1/grants: operators create, list and revoke; researchers list their own and their
groups' (those their tokens prove now)."""

from __future__ import annotations

from typing import Any

from flask_smorest import Blueprint

from viplanes.errors import NotFound
from viplanes.store import records as store
from viplanes.store.memberships import fresh_groups

from .auth import caller, require
from .context import AppContext, app_context
from .schemas import GrantCreateSchema, GrantQuerySchema, GrantRevokedSchema, GrantSchema
from .values import to_ts
from .views import grant_dict

bp = Blueprint("grants", __name__, url_prefix="/api/v1/grants", description="Grants (pre-authorizations)")


def _ctx() -> AppContext:
    return app_context()


@bp.route("", methods=["POST"])
@bp.arguments(GrantCreateSchema())
@bp.response(201, GrantSchema)
def create_grant(body: dict[str, Any]) -> Any:
    who = require("grant.create")
    ctx = _ctx()
    now = ctx.clock()
    gi = store.GrantInput(
        **{**body, "valid_from": to_ts(body["valid_from"]), "valid_until": to_ts(body["valid_until"])}
    )
    with ctx.db.write() as s:
        g = store.create_grant(s, gi, who.name, now, ctx.topology)
        store.audit(s, now, who.name, "grant.create", f"grant:{g.id}", "done", f"for {g.holder}")
        return grant_dict(g, now, gi.principal)


@bp.route("", methods=["GET"])
@bp.arguments(GrantQuerySchema(), location="query")
@bp.response(200, GrantSchema(many=True))
def list_grants(args: dict[str, Any]) -> Any:
    """Operators see every grant; researchers only their own."""
    who = caller()
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.read() as s:
        pid: int | None = who.id
        if who.is_operator:
            pid = None
            if "principal" in args:
                try:
                    pid = store.get_principal(s, args["principal"]).id
                except NotFound:
                    return []
        groups = fresh_groups(s, who.id, now) if pid is not None and who.from_provider else []
        rows = store.list_grants(s, pid, now if args.get("active") else None, args["limit"], args["offset"], groups)
        return [grant_dict(g, now) for g in rows]


@bp.route("/<int(max=2147483647):grant_id>", methods=["GET"])
@bp.response(200, GrantSchema)
def show_grant(grant_id: int) -> Any:
    who = caller()
    ctx = _ctx()
    with ctx.db.read() as s:
        g = store.get_grant(s, grant_id)
        if (
            not who.is_operator
            and g.principal_id != who.id
            and (not who.from_provider or g.group_name not in fresh_groups(s, who.id, ctx.clock()))
        ):
            raise NotFound(f"no grant {grant_id}")
        return grant_dict(g, ctx.clock())


@bp.route("/<int(max=2147483647):grant_id>/revoke", methods=["POST"])
@bp.response(200, GrantRevokedSchema)
def revoke_grant(grant_id: int) -> Any:
    """Revoke the grant; its live lanes end (state revoked) and leave the switches."""
    who = require("grant.revoke")
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.write() as s:
        lane_ids = store.revoke_grant(s, grant_id, now, actor=who.name)
        store.audit(s, now, who.name, "grant.revoke", f"grant:{grant_id}", "done", store.ended_lanes_reason(lane_ids))
        out = {"grant": grant_dict(store.get_grant(s, grant_id), now), "revoked_lanes": lane_ids}
    ctx.manager.revoke_lanes(lane_ids)
    return out
