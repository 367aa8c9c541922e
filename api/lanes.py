"""/api/v1/lanes: request, list, show, extend, release, revoke, stats."""

from __future__ import annotations

import re
import time
from typing import Any

from flask import request
from flask_smorest import Blueprint

from viplanes.errors import Invalid
from viplanes.lanes.manager import LaneInput

from .auth import caller, require
from .context import AppContext, app_context
from .schemas import CountersSchema, ExtendSchema, LaneQuerySchema, LaneRequestSchema, LaneSchema
from .values import to_ts
from .views import lane_dict

bp = Blueprint("lanes", __name__, url_prefix="/api/v1/lanes", description="VIP lanes")
_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")


def _ctx() -> AppContext:
    return app_context()


@bp.route("", methods=["POST"])
@bp.arguments(LaneRequestSchema())
@bp.response(201, LaneSchema, description="the lane, active or failed (immediate) or scheduled")
@bp.alt_response(200, schema=LaneSchema, description="an earlier answer to the same Idempotency-Key")
@bp.doc(
    parameters=[
        {
            "in": "header",
            "name": "Idempotency-Key",
            "required": False,
            "schema": {"type": "string", "pattern": r"^[!-~]{1,128}$"},
        }
    ]
)
def request_lane(body: dict[str, Any]) -> Any:
    """Request a lane; an immediate lane is activated before the answer."""
    t0 = time.perf_counter()
    who = caller()
    key = request.headers.get("Idempotency-Key")
    if key is not None and not _KEY.fullmatch(key):
        raise Invalid("Idempotency-Key must be 1-128 printable ASCII characters", code="invalid_header")
    ctx = _ctx()
    lane, created = ctx.manager.request(
        who,
        LaneInput(
            src_ip=body["src_ip"],
            dst_ip=body["dst_ip"],
            protocol=body["protocol"],
            dst_port=body["dst_port"],
            duration_s=body["duration_s"],
            purpose=body["purpose"],
            src_port=body["src_port"],
            start_at=to_ts(body["start_at"]),
            rate_mbps=body["rate_mbps"],
            dst_prefix=body["dst_prefix"],
            dst_host=body["dst_host"],
            dst_ports=body["dst_ports"],
        ),
        key,
    )
    ctx.metrics.request_seconds.observe(time.perf_counter() - t0)
    return lane_dict(lane, who, ctx.topology), 201 if created else 200


@bp.route("", methods=["GET"])
@bp.arguments(LaneQuerySchema(), location="query")
@bp.response(200, LaneSchema(many=True))
def list_lanes(args: dict[str, Any]) -> Any:
    """Lanes the caller may see (researchers: their own), newest first."""
    who = caller()
    lanes = _ctx().manager.list(who, **args)
    return [lane_dict(lane, who, _ctx().topology) for lane in lanes]


@bp.route("/<int(max=2147483647):lane_id>", methods=["GET"])
@bp.response(200, LaneSchema)
def show_lane(lane_id: int) -> Any:
    who = caller()
    return lane_dict(_ctx().manager.get(who, lane_id), who, _ctx().topology)


@bp.route("/<int(max=2147483647):lane_id>/extend", methods=["POST"])
@bp.arguments(ExtendSchema())
@bp.response(200, LaneSchema)
def extend_lane(body: dict[str, Any], lane_id: int) -> Any:
    """Add ``add_s`` seconds, within the grant's limits."""
    who = caller()
    return lane_dict(_ctx().manager.extend(who, lane_id, body["add_s"]), who, _ctx().topology)


@bp.route("/<int(max=2147483647):lane_id>/release", methods=["POST"])
@bp.response(200, LaneSchema)
def release_lane(lane_id: int) -> Any:
    """End a lane early (its owner, or an operator)."""
    who = caller()
    return lane_dict(_ctx().manager.end(who, lane_id, "released"), who, _ctx().topology)


@bp.route("/<int(max=2147483647):lane_id>/revoke", methods=["POST"])
@bp.response(200, LaneSchema)
def revoke_lane(lane_id: int) -> Any:
    """End a lane by operator decision."""
    who = require("lane.revoke")
    return lane_dict(_ctx().manager.end(who, lane_id, "revoked"), who, _ctx().topology)


@bp.route("/<int(max=2147483647):lane_id>/stats", methods=["GET"])
@bp.response(200, CountersSchema)
def lane_stats(lane_id: int) -> Any:
    """Packets and bytes the lane carried (null when the controller has no counters)."""
    lane, counters = _ctx().manager.counters(caller(), lane_id)
    return {
        "lane_id": lane.id,
        "state": lane.state,
        "available": counters is not None,
        "packets": counters.packets if counters else None,
        "bytes": counters.bytes if counters else None,
        "age_s": counters.age_s if counters else None,
    }
