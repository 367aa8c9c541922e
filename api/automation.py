"""/api/v1/automation and /api/v1/grants/<id>/auto: automatic lanes (issue 32).

Operators set a grant's automation policy and the global switch; switching either off ends the
automatic lanes it covered at once (revoked, audited). Researchers read their own grants' policy
and the switch. Views are thin: schema in, ``viplanes.store.automation``, the lane manager for ends.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import marshmallow as ma
from flask_smorest import Blueprint
from marshmallow import fields as f
from marshmallow import validate as v

from viplanes.auto.policy import AutoPolicy
from viplanes.errors import NotFound, VipError
from viplanes.store import automation as auto
from viplanes.store import records

from .auth import caller, require
from .context import AppContext, app_context
from .values import Strict

bp = Blueprint("automation", __name__, url_prefix="/api/v1", description="Automatic lanes")

# setting automation is grant configuration: the same operator-only action as creating a grant
_ACTION = "grant.create"


class AutoPolicySchema(Strict):
    enabled = f.Boolean(required=True)
    min_rate_mbps = f.Float(allow_none=True, load_default=None, validate=v.Range(0, 1e6, min_inclusive=False))
    window_s = f.Float(load_default=2.0, validate=v.Range(0.1, 3600))
    min_bytes = f.Integer(allow_none=True, load_default=None, validate=v.Range(1, 10**15))
    idle_s = f.Integer(load_default=30, validate=v.Range(1, 86400))
    max_auto_lanes = f.Integer(load_default=1, validate=v.Range(1, 1000))
    fireflies = f.Boolean(load_default=False)
    max_duration_s = f.Integer(load_default=3600, validate=v.Range(10, 7 * 86400))


class AutoPolicyOutSchema(ma.Schema):
    grant_id = f.Integer(required=True)
    enabled = f.Boolean(required=True)
    min_rate_mbps = f.Float(allow_none=True)
    window_s = f.Float()
    min_bytes = f.Integer(allow_none=True)
    idle_s = f.Integer()
    max_auto_lanes = f.Integer()
    fireflies = f.Boolean()
    max_duration_s = f.Integer()
    ended_lanes = f.List(f.Integer(), metadata={"description": "automatic lanes this change ended"})


class SwitchSchema(Strict):
    enabled = f.Boolean(required=True)


class SwitchOutSchema(ma.Schema):
    enabled = f.Boolean(required=True)
    live_auto_lanes = f.Integer(required=True)
    ended_lanes = f.List(f.Integer())


def _ctx() -> AppContext:
    return app_context()


def _end_all(who: Any, grant_id: int | None) -> list[int]:
    """Revoke the live automatic lanes (of one grant, or all) through the manager."""
    ctx = _ctx()
    with ctx.db.read() as s:
        lanes = auto.live_auto_lanes(s, grant_id)
    ended = []
    for lane in lanes:
        try:
            ctx.manager.end(who, lane.lane_id, "revoked")
            ended.append(lane.lane_id)
        except VipError:  # ended meanwhile
            pass
    return ended


@bp.route("/automation", methods=["GET"])
@bp.response(200, SwitchOutSchema)
def show_switch() -> Any:
    caller()
    with _ctx().db.read() as s:
        return {"enabled": auto.automation_on(s), "live_auto_lanes": len(auto.live_auto_lanes(s))}


@bp.route("/automation", methods=["PUT"])
@bp.arguments(SwitchSchema())
@bp.response(200, SwitchOutSchema)
def set_switch(body: dict[str, Any]) -> Any:
    """Turn automatic lanes on or off for everyone; off ends every automatic lane now."""
    who = require(_ACTION)
    ctx = _ctx()
    now = ctx.clock()
    with ctx.db.write() as s:
        auto.set_automation(s, body["enabled"], who.name, now)
        records.audit(s, now, who.name, "automation.set", "automation", "done", "on" if body["enabled"] else "off")
    ended = [] if body["enabled"] else _end_all(who, None)
    with ctx.db.read() as s:
        return {"enabled": auto.automation_on(s), "live_auto_lanes": len(auto.live_auto_lanes(s)), "ended_lanes": ended}


@bp.route("/grants/<int(max=2147483647):grant_id>/auto", methods=["GET"])
@bp.response(200, AutoPolicyOutSchema)
def show_policy(grant_id: int) -> Any:
    who = caller()
    with _ctx().db.read() as s:
        g = records.get_grant(s, grant_id)
        if not who.is_operator and g.principal_id != who.id:
            raise NotFound(f"no grant {grant_id}")
        return {"grant_id": grant_id, **asdict(auto.get_policy(s, grant_id))}


@bp.route("/grants/<int(max=2147483647):grant_id>/auto", methods=["PUT"])
@bp.arguments(AutoPolicySchema())
@bp.response(200, AutoPolicyOutSchema)
def set_policy(body: dict[str, Any], grant_id: int) -> Any:
    """Set the grant's automation policy; disabling it ends the grant's automatic lanes now."""
    who = require(_ACTION)
    ctx = _ctx()
    now = ctx.clock()
    policy = AutoPolicy(**body)  # cross-field checks: 422 invalid_auto_policy
    with ctx.db.write() as s:
        auto.set_policy(s, grant_id, policy, who.name, now)
        records.audit(s, now, who.name, "grant.auto", f"grant:{grant_id}", "done", "on" if policy.enabled else "off")
    ended = [] if policy.enabled else _end_all(who, grant_id)
    return {"grant_id": grant_id, **asdict(policy), "ended_lanes": ended}
