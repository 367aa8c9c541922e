"""A lane request, before it is stored: the policy's view of it, the row it becomes, and what a
refusal answers. Pure but for one count of a grant's bookings; the manager orchestrates.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select

from viplanes.authz.tokens import Caller
from viplanes.domain.values import NatMapping
from viplanes.errors import Conflict, Forbidden, Invalid, VipError
from viplanes.lanes import states
from viplanes.lanes.specs import NAT_ADDRESS, NAT_PORT
from viplanes.lanes.targets import LaneInput, LaneTarget
from viplanes.policy.rules import START_SLACK_S, Decision, LaneRequest, lane_sources
from viplanes.store.models import Lane
from viplanes.topologies.model import Topology

BOOKINGS_PER_LANE = 10  # lanes a grant may book ahead, per lane of its max_lanes


def to_request(body: LaneInput, target: LaneTarget, topology: Topology, now: float) -> LaneRequest:
    """The policy's view of a request: the source host's own addresses, the window, the targets."""
    try:
        src = ipaddress.ip_address(body.src_ip)
    except ValueError as exc:
        raise Invalid(str(exc), code="invalid_address") from None
    start = now if body.start_at is None or body.start_at <= now else body.start_at
    if body.start_at is not None and body.start_at < now - START_SLACK_S:
        start = body.start_at  # let the policy refuse it with its reason
    host = topology.host_by_ip(src)
    sources: tuple[Any, ...] = ()
    if host is not None:
        # ``src_ip`` names a host; its packets leave from the host's address of each destination
        # family, and the grant must cover those. Stored: the address the packets leave from
        # (the IPv4 one for a lane of both families), and the duplicate check compares every
        # address of the host (``source_aliases``): a dual-stack host asked for under its other
        # address was another source to it, so a second lane with the same flows (overwriting
        # the first's) and a second lane-pool address got through.
        sources = lane_sources(host, target.nets)
        src = sources[0] if len(sources) == 1 else (host.address_for(4) or src)
    return LaneRequest(
        src_ip=src,
        dst_ip=None,
        protocol=body.protocol,
        dst_port=None,
        src_port=body.src_port,
        duration_s=body.duration_s,
        starts_at=start,
        rate_mbps=body.rate_mbps,
        dst_nets=target.nets,
        dst_ports=target.ports,
        src_addrs=sources,
    )


def within_bookings(conn: Connection, decision: Decision, rules: Sequence[Any]) -> Decision:
    """A grant books at most ``BOOKINGS_PER_LANE`` x max_lanes lanes ahead. max_lanes counts
    lanes whose windows overlap, so without this one grant could book any number of lanes in
    windows of their own (a year of 1-second lanes: 31 million rows for the scheduler)."""
    rule = next(r for r in rules if r.grant_id == decision.grant_id)
    cap = BOOKINGS_PER_LANE * rule.max_lanes
    booked = (
        conn.scalar(
            select(func.count()).select_from(Lane).where(Lane.grant_id == decision.grant_id, Lane.state == "scheduled")
        )
        or 0
    )
    if booked < cap:
        return decision
    return Decision(
        False,
        "too_many_bookings",
        f"grant {decision.grant_id} already has {booked} lanes booked "
        f"ahead, its most ({BOOKINGS_PER_LANE} x max_lanes {rule.max_lanes})",
        decision.grant_id,
    )


def refusal(decision: Decision) -> VipError:
    """A refused decision as the error the API answers with (409 for counts, else 403)."""
    if decision.code == "quota":
        return Conflict(decision.reason, {"grant_id": decision.grant_id}, code="quota_exceeded")
    if decision.code == "too_many_bookings":
        return Conflict(decision.reason, {"grant_id": decision.grant_id}, code="too_many_bookings")
    return Forbidden(decision.reason, {"grant_id": decision.grant_id}, code=decision.code)


def lane_row(
    caller: Caller,
    body: LaneInput,
    target: LaneTarget,
    req: LaneRequest,
    decision: Decision,
    now: float,
    nat_ip: str | None,
    ttl_s: float | None,
    idempotency_key: str | None,
    digest: str,
) -> dict[str, Any]:
    """The columns of a new lane's row: an allowed request, its target and its first state
    (``installing`` now, or ``scheduled`` for a booking) taken from the state table."""
    immediate = req.starts_at <= now
    src = str(req.src_ip)
    # a plain lane (one address, one port, no name) keeps today's row; every other shape has
    # dst_ip/dst_port NULL and its set in dst_nets/dst_ports (the overlap check's index relies on it)
    plain = target.single_address() is not None and target.single_port() is not None and not target.host
    refresh = now + ttl_s if ttl_s is not None else None
    reason = decision.reason + (
        f"; {target.host} also has {', '.join(target.dropped)} (no address of that family on the source)"
        if target.dropped
        else ""
    )
    return dict(
        principal_id=caller.id,
        grant_id=decision.grant_id,
        src_ip=src,
        dst_ip=target.single_address() if plain else None,
        protocol=req.protocol,
        dst_port=target.single_port() if plain else None,
        src_port=req.src_port,
        dst_nets=None if plain else target.net_strings(),
        dst_ports=None if plain else [list(r) for r in target.ports],
        dst_host=target.host,
        dst_refresh_at=refresh,
        duration_s=req.duration_s,
        rate_mbps=req.rate_mbps,
        purpose=body.purpose,
        **states.change(states.REQUESTED, states.INSTALLING if immediate else states.SCHEDULED),
        reason=reason,
        nat_ip=nat_ip,
        idempotency_key=idempotency_key,
        request_hash=digest if idempotency_key else None,
        created_at=now,
        starts_at=req.starts_at,
        expires_at=req.expires_at,
        activated_at=None,
        ended_at=None,
        activation_ms=None,
    )


@dataclass(frozen=True)
class LaneTrigger:
    """What made an automatic lane (``viplanes.auto``): the sighting's kind, the grant whose
    automation allowed it, and the evidence (sampled rate, or the firefly's experiment/activity)."""

    kind: str
    grant_id: int
    detail: dict[str, Any] = field(default_factory=dict)
    # a running NAT'd connection taken over: the lane keeps the NAT's mapping, no lane-pool address
    takeover: NatMapping | None = None

    def columns(self) -> dict[str, Any]:
        detail = dict(self.detail)
        if self.takeover is not None:
            detail.update({NAT_ADDRESS: self.takeover.address, NAT_PORT: self.takeover.port})
        return {
            "trigger_kind": self.kind,
            "trigger_grant_id": self.grant_id,
            "trigger_detail": json.dumps(detail, sort_keys=True),
        }
