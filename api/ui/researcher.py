"""A researcher's page: request a lane from one of their grants (the form offers only what the
grant allows), see their lanes and release them. Operators may use it too."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from flask import redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from viplanes.errors import VipError
from viplanes.lanes.manager import LaneInput
from viplanes.policy.destinations import destination_refusal
from viplanes.policy.rules import parse_ports, parse_prefix
from viplanes.store import records as store
from viplanes.store.memberships import fresh_groups
from viplanes.store.models import LIVE_STATES

from ..schemas import LaneRequestSchema
from .forms import as_number, checked
from .lanes_pages import live_lanes, with_counters
from .web import bp, caller, ctx


@dataclass(frozen=True)
class GrantChoice:
    """One grant as a request form: the choices it leaves."""

    grant: Any
    sources: list[tuple[str, str]]  # (ip, "desktop 10.1.0.10")
    destinations: list[str]  # addresses inside the grant a lane may reach, as suggestions
    port_min: int
    port_max: int
    max_minutes: int


def _sort_key(addr: str) -> tuple[int, int]:
    """IPv4 before IPv6, each in address order (a grant may name both families)."""
    ip = ipaddress.ip_address(addr)
    return ip.version, int(ip)


def _choice(g: Any) -> GrantChoice:
    topo = ctx().topology
    src_nets = [parse_prefix(p) for p in g.src_prefixes]
    dst_nets = [parse_prefix(p) for p in g.dst_prefixes]
    sources: list[tuple[str, str]] = []
    dests: list[str] = []
    for h in topo.hosts:
        for addr in (h.iface.ip.ip, h.ip6):
            if addr is None:
                continue
            if h.role != "cloud" and any(addr in n for n in src_nets):
                sources.append((str(addr), f"{h.name} {addr}"))
            if any(addr in n for n in dst_nets):
                dests.append(str(addr))
    # a single-address destination of either family (IPv4 /32, IPv6 /128) is a suggestion too
    dests += [str(n.network_address) for n in dst_nets if n.num_addresses == 1]
    # suggest only what the destination policy lets a lane reach (no campus host of a wide grant)
    dests = [d for d in set(dests) if destination_refusal(ipaddress.ip_address(d), topo) is None]
    ranges = parse_ports(g.ports)
    return GrantChoice(
        g,
        sources,
        sorted(dests, key=_sort_key),
        min(lo for lo, _ in ranges),
        max(hi for _, hi in ranges),
        max(1, g.max_duration_s // 60),
    )


@bp.route("/mine", endpoint="mine")
def mine() -> ResponseReturnValue:
    return _mine_view(request.args.get("grant", type=int))


def _mine_view(
    picked: int | None,
    form: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
    form_error: dict[str, str] | None = None,
    status: int = 200,
) -> ResponseReturnValue:
    """The page; ``form``/``errors`` refill grant ``picked``'s form after a refusal."""
    who = caller()
    c = ctx()
    now = c.clock()
    with c.db.read() as s:
        # group grants count only for a campus sign-in, and only while the evidence is fresh
        held = fresh_groups(s, who.id, now) if who.from_provider else []
        grants = [g for g in store.list_grants(s, who.id, now, 100, 0, held) if store.grant_state(g, now) == "active"]
        choices = [_choice(g) for g in grants]
    recent = [ln for ln in c.manager.list(who, principal=who.name, limit=50) if ln.principal_id == who.id]
    if form is not None and choices and picked not in {ch.grant.id for ch in choices}:
        picked = choices[0].grant.id  # a form posted without its grant: refill the first
    page = render_template(
        "ui/mine.html",
        choices=choices,
        rows=with_counters(live_lanes(own=True)),
        back="mine",
        ended=[ln for ln in recent if ln.state not in LIVE_STATES][:20],
        now=now,
        picked=picked,
        form=form,
        errors=errors or {},
        form_error=form_error,
    )
    return page, status


# schema field -> the form field showing it
FORM_NAMES = {"duration_s": "duration_min"}


@bp.route("/mine/request", methods=["POST"], endpoint="mine_request")
def mine_request() -> ResponseReturnValue:
    """The same call as POST /api/v1/lanes: policy decides, the manager activates. A refusal
    shows the page again with the researcher's values and the reason beside the field."""
    who = caller()
    f = request.form
    form = dict(f)
    picked = as_number(f.get("grant"))
    picked = picked if isinstance(picked, int) else None
    minutes = as_number(f.get("duration_min"))
    body, errors = checked(
        LaneRequestSchema(),
        {
            "src_ip": f.get("src_ip", "").strip(),
            "dst_ip": f.get("dst_ip", "").strip(),
            "protocol": f.get("protocol", ""),
            "dst_port": as_number(f.get("dst_port")),
            "duration_s": minutes * 60 if isinstance(minutes, int) else minutes,
            "rate_mbps": as_number(f.get("rate_mbps")),
            "purpose": f.get("purpose", "").strip(),
        },
        FORM_NAMES,
    )
    if body is None:
        return _mine_view(picked, form, errors, status=422)
    try:
        lane, _ = ctx().manager.request(
            who,
            LaneInput(
                src_ip=body["src_ip"],
                dst_ip=body["dst_ip"],
                protocol=body["protocol"],
                dst_port=body["dst_port"],
                duration_s=body["duration_s"],
                purpose=body["purpose"],
                src_port=None,
                start_at=None,
                rate_mbps=body.get("rate_mbps"),
            ),
        )
    except VipError as exc:  # refused by policy, a duplicate, switches not ready: say why, keep values
        return _mine_view(picked, form, {}, {"code": exc.code, "message": exc.message}, status=exc.status)
    return redirect(url_for("ui.lane", lane_id=lane.id))
