"""Grants (create, edit limits, revoke, with the lanes each covers) and principals (create,
disable, rotate token). Operator pages; every change is audited like its API twin."""

from __future__ import annotations

from typing import Any

from flask import redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy import select

from viplanes.errors import Conflict, Invalid, NotFound
from viplanes.store import records as store
from viplanes.store.models import LIVE_STATES, Lane

from ..schemas import GrantCreateSchema, PrincipalCreateSchema
from ..values import to_ts
from .forms import as_number, checked, split_list
from .web import bp, ctx, need, operator_only


def _lanes_by_grant(s: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for lane_id, grant_id in s.execute(select(Lane.id, Lane.grant_id).where(Lane.state.in_(LIVE_STATES))):
        out.setdefault(grant_id, []).append(lane_id)
    return out


GRANT_FORM_DEFAULTS = {"protocols": ["tcp"], "max_duration_min": "60", "max_lanes": "1"}
# schema field -> the form field that shows it (durations are minutes on every page)
FORM_NAMES = {"max_duration_s": "max_duration_min"}


@bp.route("/grants", endpoint="grants")
def grants_page() -> ResponseReturnValue:
    operator_only()
    return _grants_view(GRANT_FORM_DEFAULTS)


def _grants_view(
    form: dict[str, Any],
    errors: dict[str, str] | None = None,
    form_error: dict[str, str] | None = None,
    status: int = 200,
) -> ResponseReturnValue:
    """The grants list and the new-grant form, filled with ``form`` and its errors."""
    c = ctx()
    with c.db.read() as s:
        grants = store.list_grants(s, None, None, 500, 0)
        states = {g.id: store.grant_state(g, c.clock()) for g in grants}
        covers = _lanes_by_grant(s)
        researchers = [
            p.name
            for p in sorted(store.list_principals(s), key=lambda p: (p.role != "researcher", -p.id))
            if not p.disabled
        ]  # the newest researcher first: the usual next grant
        page = render_template(
            "ui/grants.html",
            grants=grants,
            states=states,
            covers=covers,
            principals=researchers,
            form=form,
            errors=errors or {},
            form_error=form_error,
        )
    return page, status


def _minutes_to_s(raw: str | None) -> Any:
    """'90' minutes -> 5400 s; anything not a number stays as it is, for the schema to name."""
    minutes = as_number(raw)
    return round(minutes * 60) if isinstance(minutes, (int, float)) else minutes


def _grant_form() -> dict[str, Any]:
    f = request.form
    return {
        "principal": f.get("principal", "").strip(),
        "src_prefixes": split_list(f.get("src_prefixes")),
        "dst_prefixes": split_list(f.get("dst_prefixes")),
        "protocols": f.getlist("protocols"),
        "ports": [as_number(p) for p in split_list(f.get("ports"))],
        "max_duration_s": _minutes_to_s(f.get("max_duration_min")),
        "max_rate_mbps": as_number(f.get("max_rate_mbps")),
        "max_lanes": as_number(f.get("max_lanes")),
        "valid_from": f.get("valid_from"),
        "valid_until": f.get("valid_until"),
    }


@bp.route("/grants", methods=["POST"], endpoint="grant_create")
def grant_create() -> ResponseReturnValue:
    who = need("grant.create")
    form = {**request.form, "protocols": request.form.getlist("protocols")}
    body, errors = checked(GrantCreateSchema(), _grant_form(), FORM_NAMES)
    if body is None:
        return _grants_view(form, errors, status=422)
    c = ctx()
    now = c.clock()
    gi = store.GrantInput(
        **{**body, "valid_from": to_ts(body.get("valid_from")), "valid_until": to_ts(body.get("valid_until"))}
    )
    try:
        with c.db.write() as s:
            g = store.create_grant(s, gi, who.name, now, c.topology)
            store.audit(s, now, who.name, "grant.create", f"grant:{g.id}", "done", f"for {g.holder}")
            grant_id = g.id
    except (Invalid, NotFound) as exc:  # refused by the campus model (e.g. a campus destination)
        return _grants_view(form, {}, {"code": exc.code, "message": exc.message}, status=exc.status)
    return redirect(url_for("ui.grant", grant_id=grant_id, created=1))


@bp.route("/grants/<int(max=2147483647):grant_id>", methods=["GET", "POST"], endpoint="grant")
def grant_page(grant_id: int) -> ResponseReturnValue:
    """GET shows the grant and its edit form; POST saves new limits (same checks as create)."""
    who = operator_only()
    c = ctx()
    if request.method == "POST":
        need("grant.create")
        with c.db.read() as s:
            g = store.get_grant(s, grant_id)
            base = {
                "principal": g.principal.name if g.principal is not None else None,
                "group": g.group_name,
                "src_prefixes": g.src_prefixes,
                "dst_prefixes": g.dst_prefixes,
                "protocols": g.protocols,
                "ports": g.ports,
            }
        form = _grant_form()
        body, errors = checked(
            GrantCreateSchema(),
            {**base, **{k: form[k] for k in ("max_duration_s", "max_rate_mbps", "max_lanes", "valid_until")}},
            FORM_NAMES,
        )
        if body is None:
            return _grant_view(grant_id, dict(request.form), errors, 422)
        now = c.clock()
        with c.db.write() as s:
            store.update_grant_limits(
                s,
                grant_id,
                body["max_duration_s"],
                body.get("max_rate_mbps"),
                body["max_lanes"],
                to_ts(body.get("valid_until")),
            )
            store.audit(
                s,
                now,
                who.name,
                "grant.edit",
                f"grant:{grant_id}",
                "done",
                f"max_duration_s={body['max_duration_s']} max_rate_mbps={body.get('max_rate_mbps')} "
                f"max_lanes={body['max_lanes']}",
            )
        return redirect(url_for("ui.grant", grant_id=grant_id, saved=1))
    return _grant_view(grant_id)


def _grant_view(
    grant_id: int, form: dict[str, Any] | None = None, errors: dict[str, str] | None = None, status: int = 200
) -> ResponseReturnValue:
    """One grant, its lanes and its limits form (``form``: the values just refused, if any)."""
    c = ctx()
    with c.db.read() as s:
        g = store.get_grant(s, grant_id)
        lanes = s.scalars(select(Lane).where(Lane.grant_id == grant_id).order_by(Lane.id.desc()).limit(100)).all()
        page = render_template(
            "ui/grant.html",
            g=g,
            state=store.grant_state(g, c.clock()),
            lanes=lanes,
            saved=bool(request.args.get("saved")),
            created=bool(request.args.get("created")),
            form=form,
            errors=errors or {},
        )
    return page, status


@bp.route("/grants/<int(max=2147483647):grant_id>/revoke", methods=["GET", "POST"], endpoint="grant_revoke")
def grant_revoke(grant_id: int) -> ResponseReturnValue:
    who = need("grant.revoke")
    c = ctx()
    if request.method == "GET":
        with c.db.read() as s:
            g = store.get_grant(s, grant_id)
            covers = _lanes_by_grant(s).get(grant_id, [])
            return render_template(
                "ui/confirm.html",
                title=f"Revoke grant {grant_id}?",
                text=f"Grant {grant_id} of {g.holder} ends now, and with it "
                f"{len(covers)} live lane(s): {covers or 'none'}.",
                action=url_for("ui.grant_revoke", grant_id=grant_id),
                button="Revoke the grant",
                cancel=url_for("ui.grant", grant_id=grant_id),
            )
    now = c.clock()
    with c.db.write() as s:
        lane_ids = store.revoke_grant(s, grant_id, now, actor=who.name)
        store.audit(s, now, who.name, "grant.revoke", f"grant:{grant_id}", "done", store.ended_lanes_reason(lane_ids))
    c.manager.revoke_lanes(lane_ids)
    return redirect(url_for("ui.grant", grant_id=grant_id))


# --- principals -------------------------------------------------------------------------------


@bp.route("/principals", endpoint="principals")
def principals_page() -> ResponseReturnValue:
    need("principal.list")
    return _principals_view({})


def _principals_view(
    form: dict[str, Any],
    errors: dict[str, str] | None = None,
    form_error: dict[str, str] | None = None,
    status: int = 200,
) -> ResponseReturnValue:
    with ctx().db.read() as s:
        page = render_template(
            "ui/principals.html",
            principals=store.list_principals(s),
            form=form,
            errors=errors or {},
            form_error=form_error,
        )
    return page, status


@bp.route("/principals", methods=["POST"], endpoint="principal_create")
def principal_create() -> ResponseReturnValue:
    who = need("principal.create")
    form = {"name": request.form.get("name", "").strip(), "role": request.form.get("role", "")}
    body, errors = checked(PrincipalCreateSchema(), form)
    if body is None:
        return _principals_view(form, errors, status=422)
    c = ctx()
    now = c.clock()
    try:
        with c.db.write() as s:
            p, token = store.create_principal(s, body["name"], body["role"], now)
            store.audit(s, now, who.name, "principal.create", f"principal:{p.name}", "done", p.role)
            name = p.name
    except (Invalid, Conflict) as exc:  # e.g. the name is taken
        return _principals_view(form, {"name": exc.message}, status=exc.status)
    return render_template("ui/token.html", name=name, token=token, created=True)


@bp.route("/principals/<name>/<any(disable, rotate):action>", methods=["GET", "POST"], endpoint="principal_action")
def principal_action(name: str, action: str) -> ResponseReturnValue:
    who = need(f"principal.{action}")
    c = ctx()
    with c.db.read() as s:
        name = store.get_principal(s, name).name
    if request.method == "GET":
        text = (
            f"{name} can no longer sign in or use the API; their console sessions and live lanes end "
            "now and their bookings are cancelled."
            if action == "disable"
            else f"{name}'s current token stops working at once and their console sessions end; "
            "a new token is shown once."
        )
        return render_template(
            "ui/confirm.html",
            title=f"{action.capitalize()} {name}?",
            text=text,
            action=url_for("ui.principal_action", name=name, action=action),
            button=f"{action.capitalize()} {name}",
            cancel=url_for("ui.principals"),
        )
    now = c.clock()
    lane_ids: list[int] = []
    with c.db.write() as s:
        if action == "disable":
            _, lane_ids = store.disable_principal(s, name, now, actor=who.name)
        else:
            token = store.rotate_token(s, name, now)
        reason = store.ended_lanes_reason(lane_ids)
        store.audit(s, now, who.name, f"principal.{action}", f"principal:{name}", "done", reason)
    if action == "disable":
        c.manager.revoke_lanes(lane_ids)
        return redirect(url_for("ui.principals"))
    return render_template("ui/token.html", name=name, token=token, created=False)
