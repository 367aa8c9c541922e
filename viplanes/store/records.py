"""Principals, tokens, grants and audit events on a Session. Lanes live in ``viplanes.lanes``;
a grant's revoke ends them through the state table (``viplanes.lanes.states``).

Every function works inside the caller's transaction (``Database.read()``/``write()``) so one
API request is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from viplanes.authz.oidcclaims import normal_group
from viplanes.authz.tokencache import TOKENS
from viplanes.authz.tokens import Caller, hash_token, new_token
from viplanes.errors import Conflict, Invalid, NotFound
from viplanes.policy.destinations import grant_prefix_refusal
from viplanes.policy.rules import GrantRule, PolicyInputError, format_ports, parse_ports, parse_prefix
from viplanes.store.lanesql.core import add_audit, end_grant_lanes, end_principal_lanes
from viplanes.store.models import ApiToken, AuditEvent, Grant, Principal
from viplanes.topologies.model import Topology

# --- principals and tokens -------------------------------------------------------------------


def _same_name(name: str):  # type: ignore[no-untyped-def]
    """Names compare ignoring case ("alice" is "ALICE"); the unique index on lower(name) agrees."""
    return func.lower(Principal.name) == name.lower()


def create_principal(s: Session, name: str, role: str, now: float) -> tuple[Principal, str]:
    """A new principal with its first token; the token is returned once and stored hashed."""
    existing = s.scalar(select(Principal.name).where(_same_name(name)))
    if existing is not None:
        hint = "" if existing == name else " (names ignore case)"
        raise Conflict(f"principal {existing!r} already exists{hint}", code="principal_exists")
    p = Principal(name=name, role=role, disabled=False, created_at=now)
    token = new_token()
    p.tokens.append(ApiToken(token_hash=hash_token(token), created_at=now))
    try:
        with s.begin_nested():  # a concurrent create of the same name loses on the unique index
            s.add(p)
            s.flush()
    except IntegrityError:
        raise Conflict(f"principal {name!r} already exists (names ignore case)", code="principal_exists") from None
    return p, token


def get_principal(s: Session, name: str) -> Principal:
    p = s.scalar(select(Principal).where(_same_name(name)))
    if p is None:
        raise NotFound(f"no principal {name!r}")
    return p


def list_principals(s: Session) -> Sequence[Principal]:
    return s.scalars(select(Principal).order_by(Principal.id)).all()


def rotate_token(s: Session, name: str, now: float) -> str:
    """Replace every token of the principal with one new token (old ones fail at once here)."""
    p = get_principal(s, name)
    TOKENS.invalidate_with(s)
    p.tokens.clear()
    token = new_token()
    p.tokens.append(ApiToken(token_hash=hash_token(token), created_at=now))
    s.flush()
    return token


def set_disabled(s: Session, name: str, disabled: bool = True) -> Principal:
    p = get_principal(s, name)
    if disabled and p.role == "operator" and not p.disabled:
        _keep_an_operator(s, p)
    TOKENS.invalidate_with(s)
    p.disabled = disabled
    return p


def disable_principal(s: Session, name: str, now: float, actor: str = "system") -> tuple[Principal, list[int]]:
    """Disable ``name`` and revoke every live lane it owns, bookings included (a lane is a hole
    in the firewall kept open for a person the campus no longer trusts); each lane's revoke is
    audited as ``actor``'s. Returns the lanes to take off the switches."""
    p = set_disabled(s, name, True)  # flushed by the next statement, as a grant's revoked_at is
    return p, end_principal_lanes(s, p.id, f"principal {p.name} disabled", now, actor)


def ended_lanes_reason(lane_ids: Sequence[int]) -> str:
    """The audit reason of a grant revoke or a principal disable: the lanes it ended, if any."""
    return f"ended lanes {list(lane_ids)}" if lane_ids else ""


def _keep_an_operator(s: Session, leaving: Principal) -> None:
    """Refuse to disable (or demote) ``leaving`` when it is the last enabled operator.

    The enabled operators are row-locked in id order (PostgreSQL ``FOR UPDATE``; SQLite write
    transactions are already serial), so two operators disabling each other at once queue here
    and the second sees the first's change: one operator always remains.
    """
    q = select(Principal.id).where(Principal.role == "operator", Principal.disabled.is_(False)).order_by(Principal.id)
    if s.get_bind().dialect.name != "sqlite":
        q = q.with_for_update()
    enabled = set(s.scalars(q))
    if not enabled - {leaving.id}:
        raise Conflict(
            f"{leaving.name} is the last enabled operator; create or enable another operator first",
            code="last_operator",
        )


def caller_for_token(s: Session, token: str) -> Caller | None:
    """The enabled principal holding ``token``, or None. One indexed query (uncached; the API
    goes through ``authz.tokencache.TOKENS``)."""
    row = s.execute(
        select(Principal.id, Principal.name, Principal.role)
        .join(ApiToken, ApiToken.principal_id == Principal.id)
        .where(ApiToken.token_hash == hash_token(token), Principal.disabled.is_(False))
    ).first()
    return Caller(id=row.id, name=row.name, role=row.role) if row else None


# --- grants ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrantInput:
    principal: str | None  # exactly one of principal and group (the API's schema checks it)
    src_prefixes: list[str]
    dst_prefixes: list[str]
    protocols: list[str]
    ports: list[int | str]
    max_duration_s: int
    max_rate_mbps: float | None = None
    max_lanes: int = 1
    valid_from: float | None = None
    valid_until: float | None = None
    group: str | None = None  # a provider group: every member with fresh evidence (issue 30)


def create_grant(s: Session, g: GrantInput, actor: str, now: float, topology: Topology | None = None) -> Grant:
    """Store a grant; with ``topology``, refuse destinations that lie wholly in forbidden space
    (campus subnets, the lane pool, multicast, reserved: see ``policy.destinations``)."""
    if (g.principal is None) == (g.group is None):
        raise Invalid("a grant names a principal or a group, exactly one", code="invalid_grant")
    principal_id = get_principal(s, g.principal).id if g.principal is not None else None
    group = normal_group(g.group) if g.group is not None else None
    try:
        src = [str(parse_prefix(x)) for x in g.src_prefixes]
        dst_nets = [parse_prefix(x) for x in g.dst_prefixes]
        ports = format_ports(parse_ports(g.ports))
    except PolicyInputError as exc:
        raise Invalid(str(exc), code="invalid_grant") from None
    dst = [str(x) for x in dst_nets]
    if topology is not None:
        refused = [r for r in (grant_prefix_refusal(net, topology) for net in dst_nets) if r]
        if refused:
            reasons = [why for _, why in refused]
            codes = sorted({code for code, _ in refused})
            raise Invalid("; ".join(reasons), {"dst_prefixes": reasons, "codes": codes}, code="invalid_grant")
    if g.valid_from is not None and g.valid_until is not None and g.valid_until <= g.valid_from:
        raise Invalid("valid_until must be after valid_from", code="invalid_grant")
    grant = Grant(
        principal_id=principal_id,
        group_name=group,
        src_prefixes=src,
        dst_prefixes=dst,
        protocols=sorted(set(g.protocols)),
        ports=ports,
        max_duration_s=g.max_duration_s,
        max_rate_mbps=g.max_rate_mbps,
        max_lanes=g.max_lanes,
        valid_from=g.valid_from,
        valid_until=g.valid_until,
        revoked_at=None,
        created_at=now,
        created_by=actor,
    )
    s.add(grant)
    s.flush()
    return grant


def update_grant_limits(
    s: Session,
    grant_id: int,
    max_duration_s: int,
    max_rate_mbps: float | None,
    max_lanes: int,
    valid_until: float | None,
) -> Grant:
    """Change a live grant's limits. Lanes already granted keep theirs; new requests and
    extensions meet the new ones."""
    g = get_grant(s, grant_id, lock=True)  # waits for lane requests deciding on this grant
    if g.revoked_at is not None:
        raise Conflict(f"grant {grant_id} is revoked", code="already_revoked")
    if valid_until is not None and g.valid_from is not None and valid_until <= g.valid_from:
        raise Invalid("valid_until must be after valid_from", code="invalid_grant")
    g.max_duration_s, g.max_rate_mbps, g.max_lanes, g.valid_until = (
        max_duration_s,
        max_rate_mbps,
        max_lanes,
        valid_until,
    )
    return g


def get_grant(s: Session, grant_id: int, lock: bool = False) -> Grant:
    q = select(Grant).where(Grant.id == grant_id)
    g = s.scalar(q.with_for_update(of=Grant).execution_options(populate_existing=True) if lock else q)
    if g is None:
        raise NotFound(f"no grant {grant_id}")
    return g


def list_grants(
    s: Session,
    principal_id: int | None = None,
    active_at: float | None = None,
    limit: int = 100,
    offset: int = 0,
    groups: Sequence[str] = (),
) -> Sequence[Grant]:
    """Every grant, or those of ``principal_id`` and of ``groups`` (the groups it holds now)."""
    q = select(Grant).order_by(Grant.id)
    if principal_id is not None:
        q = q.where((Grant.principal_id == principal_id) | Grant.group_name.in_(list(groups)))
    if active_at is not None:
        q = q.where(Grant.revoked_at.is_(None), (Grant.valid_until.is_(None)) | (Grant.valid_until > active_at))
    return s.scalars(q.limit(limit).offset(offset)).all()


def grant_state(g: Grant, now: float) -> str:
    if g.revoked_at is not None:
        return "revoked"
    if g.valid_until is not None and now >= g.valid_until:
        return "expired"
    if g.valid_from is not None and now < g.valid_from:
        return "pending"
    return "active"


def lock_usable_grants(s: Session, principal_id: int, now: float, for_update: bool) -> Sequence[Grant]:
    """The principal's grants that could allow a lane now or later, row-locked in id order.

    Locking in id order keeps two transactions from deadlocking on each other's grants.
    """
    q = (
        select(Grant)
        .where(
            Grant.principal_id == principal_id,
            Grant.revoked_at.is_(None),
            (Grant.valid_until.is_(None)) | (Grant.valid_until > now),
        )
        .order_by(Grant.id)
    )
    if for_update:
        q = q.with_for_update(of=Grant)
    return s.scalars(q).all()


def rule_of(g: Grant) -> GrantRule:
    return GrantRule(
        grant_id=g.id,
        src_prefixes=tuple(parse_prefix(x) for x in g.src_prefixes),
        dst_prefixes=tuple(parse_prefix(x) for x in g.dst_prefixes),
        protocols=frozenset(g.protocols),
        ports=parse_ports(g.ports),
        max_duration_s=g.max_duration_s,
        max_rate_mbps=g.max_rate_mbps,
        max_lanes=g.max_lanes,
        valid_from=g.valid_from,
        valid_until=g.valid_until,
        revoked=g.revoked_at is not None,
    )


def revoke_grant(s: Session, grant_id: int, now: float, actor: str = "system") -> list[int]:
    """Revoke the grant and end its live lanes, bookings included (each audited as ``actor``'s);
    returns the ids of lanes to take down."""
    g = get_grant(s, grant_id, lock=True)  # waits for lane requests deciding on this grant
    if g.revoked_at is not None:
        raise Conflict(f"grant {grant_id} is already revoked", code="already_revoked")
    g.revoked_at = now
    # the lanes move as the state table says (viplanes/lanes/states.py: revoke, from a live state)
    return end_grant_lanes(s, grant_id, f"grant {grant_id} revoked", now, actor)


# --- audit -----------------------------------------------------------------------------------


def audit(s: Session, now: float, actor: str, action: str, target: str, decision: str, reason: str = "") -> None:
    """One audit row, inserted now in ``s``'s transaction (a Core INSERT: no unit-of-work flush)."""
    add_audit(s.connection(), now, actor, action, target, decision, reason)


def query_audit(
    s: Session,
    actor: str | None = None,
    action: str | None = None,
    decision: str | None = None,
    target: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Sequence[AuditEvent]:
    q = select(AuditEvent)
    filters: dict[str, Any] = {"actor": actor, "action": action, "decision": decision, "target": target}
    for col, val in filters.items():
        if val is not None:
            q = q.where(getattr(AuditEvent, col) == val)
    if since is not None:
        q = q.where(AuditEvent.at >= since)
    if until is not None:
        q = q.where(AuditEvent.at < until)
    return s.scalars(q.order_by(AuditEvent.id.desc()).limit(limit).offset(offset)).all()
