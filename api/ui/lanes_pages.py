"""Live lanes (with counters and rate), a lane's detail, and revoke / extend / release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from viplanes.authz.tokens import may
from viplanes.store import records as store
from viplanes.store.models import LIVE_STATES, Lane

from .forms import int_field
from .switchview import inspector
from .web import bp, caller, ctx, need, ui_state

MAX_COUNTED = 50  # counters are read from the switches: only the newest live lanes get them


@dataclass(frozen=True)
class LaneRow:
    lane: Any
    owner: str
    bytes: int | None
    rate_bps: float | None


def live_lanes(own: bool = False) -> list[Any]:
    """Live lanes the caller may see (``own``: only the caller's, even for an operator)."""
    who = caller()
    lanes: list[Any] = []
    for state in LIVE_STATES:
        lanes += ctx().manager.list(who, state=state, limit=500)
    if own:
        lanes = [ln for ln in lanes if ln.principal_id == who.id]
    return sorted(lanes, key=lambda ln: ln.id, reverse=True)


def with_counters(lanes: list[Any]) -> list[LaneRow]:
    """Rows with bytes and the rate over the last second or more of readings in this process
    (pages polled by several people share the readings, so none of them starves the rate)."""
    c, seen = ctx(), ui_state().last_bytes
    rows = []
    for i, lane in enumerate(lanes):
        octets = rate = None
        if lane.state == "active" and i < MAX_COUNTED:
            _, counters = c.manager.counters(caller(), lane.id)
            if counters is not None:
                octets, now = counters.bytes, c.clock()
                prev, last = seen.get(lane.id, (None, None))
                if last is None or now - last[0] >= 1.0:
                    prev, last = last, (now, octets)
                    seen[lane.id] = (prev, last)
                if prev is not None and now > prev[0]:
                    rate = max(0.0, (octets - prev[1]) * 8 / (now - prev[0]))
        owner = lane.__dict__.get("principal")
        rows.append(LaneRow(lane, owner.name if owner is not None else "?", octets, rate))
    stale = c.clock() - 60  # readings of lanes nobody looked at for a minute (ended, mostly)
    for lane_id in [k for k, (_, last) in seen.items() if last is None or last[0] < stale]:
        del seen[lane_id]
    return rows


@bp.route("/lanes", endpoint="lanes")
def lanes_page() -> ResponseReturnValue:
    return render_template("ui/lanes.html", rows=with_counters(live_lanes()), now=ctx().clock(), back=None)


@bp.route("/lanes/rows", endpoint="lane_rows")
def lane_rows() -> ResponseReturnValue:
    """The table body alone, for the page's refresh poll."""
    back = "mine" if request.args.get("back") == "mine" else None
    return render_template(
        "ui/lane_rows.html", rows=with_counters(live_lanes(own=back == "mine")), now=ctx().clock(), back=back
    )


@bp.route("/lanes/<int(max=2147483647):lane_id>", endpoint="lane")
def lane_page(lane_id: int) -> ResponseReturnValue:
    who = caller()
    c = ctx()
    lane = c.manager.get(who, lane_id)
    history = None
    if may(who, "audit.read"):  # as in the API, the audit log is for operators
        with c.db.read() as s:
            history = store.query_audit(s, target=f"lane:{lane_id}", limit=200)
    _, counters = c.manager.counters(who, lane_id) if lane.state == "active" else (lane, None)
    insp = inspector()
    flows = insp.lane_flows(lane_id) if insp is not None and who.is_operator else None
    return render_template(
        "ui/lane.html",
        lane=lane,
        history=history,
        counters=counters,
        flows=flows,
        has_controller=insp is not None,
        live=lane.state in LIVE_STATES,
        now=c.clock(),
    )


ACTIONS = {"revoke": ("lane.revoke", "revoked"), "release": ("lane.release", "released")}


@bp.route(
    "/lanes/<int(max=2147483647):lane_id>/<any(revoke, release, extend):action>",
    methods=["GET", "POST"],
    endpoint="lane_action",
)
def lane_action(lane_id: int, action: str) -> ResponseReturnValue:
    """GET asks for confirmation; POST (with the CSRF token) acts through the lane manager."""
    who = need("lane.revoke") if action == "revoke" else caller()
    c = ctx()
    lane: Lane = c.manager.get(who, lane_id)
    if request.method == "GET":
        return render_template("ui/confirm_lane.html", lane=lane, action=action)
    if action == "extend":
        minutes = int_field(request.form, "add_min", 1, 7 * 24 * 60)
        c.manager.extend(who, lane_id, minutes * 60)
    else:
        c.manager.end(who, lane_id, ACTIONS[action][1])
    back = request.form.get("back")
    if back == "mine":
        return redirect(url_for("ui.mine"))
    return redirect(url_for("ui.lane", lane_id=lane_id))
