"""/api/v1/principals: operators create, list, rotate tokens and disable; anyone asks whoami."""

from __future__ import annotations

from typing import Any

from flask_smorest import Blueprint

from viplanes.store import records as store

from .auth import caller, require
from .context import AppContext, app_context
from .schemas import (
    PrincipalCreateSchema,
    PrincipalDisabledSchema,
    PrincipalSchema,
    PrincipalTokenSchema,
    WhoAmISchema,
)
from .values import NAME
from .views import principal_dict

bp = Blueprint("principals", __name__, url_prefix="/api/v1", description="Principals and tokens")


def _ctx() -> AppContext:
    return app_context()


def _name(name: str) -> str:
    from viplanes.errors import NotFound

    try:
        NAME(name)
    except Exception:
        raise NotFound(f"no principal {name!r}") from None
    return name


@bp.route("/principals", methods=["POST"])
@bp.arguments(PrincipalCreateSchema())
@bp.response(201, PrincipalTokenSchema, description="the token is shown once")
def create_principal(body: dict[str, Any]) -> Any:
    who = require("principal.create")
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.write() as s:
        p, token = store.create_principal(s, body["name"], body["role"], now)
        store.audit(s, now, who.name, "principal.create", f"principal:{p.name}", "done", p.role)
        return principal_dict(p, token)


@bp.route("/principals", methods=["GET"])
@bp.response(200, PrincipalSchema(many=True))
def list_principals() -> Any:
    require("principal.list")
    with _ctx().db.read() as s:
        return [principal_dict(p) for p in store.list_principals(s)]


@bp.route("/principals/<name>/rotate", methods=["POST"])
@bp.response(200, PrincipalTokenSchema, description="the new token, shown once; old tokens stop working")
def rotate_token(name: str) -> Any:
    who = require("principal.rotate")
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.write() as s:
        token = store.rotate_token(s, _name(name), now)
        p = store.get_principal(s, name)
        store.audit(s, now, who.name, "principal.rotate", f"principal:{p.name}", "done")
        return principal_dict(p, token)


@bp.route("/principals/<name>/disable", methods=["POST"])
@bp.response(200, PrincipalDisabledSchema)
def disable_principal(name: str) -> Any:
    """Disable a principal: its tokens and sessions stop working and its live lanes are revoked."""
    who = require("principal.disable")
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.write() as s:
        p, lane_ids = store.disable_principal(s, _name(name), now, actor=who.name)
        reason = store.ended_lanes_reason(lane_ids)
        store.audit(s, now, who.name, "principal.disable", f"principal:{p.name}", "done", reason)
        out = {**principal_dict(p), "revoked_lanes": lane_ids}
    ctx.manager.revoke_lanes(lane_ids)
    return out


@bp.route("/whoami", methods=["GET"])
@bp.response(200, WhoAmISchema)
def whoami() -> Any:
    c = caller()
    return {"name": c.name, "role": c.role}
