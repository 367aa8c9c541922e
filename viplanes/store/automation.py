"""The rows automation reads and writes: grant policies, the global switch, live automatic lanes."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from viplanes.auto.index import AutoGrant
from viplanes.auto.policy import PROTOCOLS, AutoPolicy
from viplanes.domain.sighting import Sighting
from viplanes.errors import NotFound
from viplanes.policy.rules import parse_ports, parse_prefix
from viplanes.store.models import LIVE_STATES, AutomationSwitch, Grant, GrantAuto, Lane, Principal

GLOBAL = "global"
_POLICY_FIELDS = tuple(AutoPolicy.__dataclass_fields__)


def policy_of(row: GrantAuto | None) -> AutoPolicy:
    if row is None:
        return AutoPolicy()
    return AutoPolicy(**{k: getattr(row, k) for k in _POLICY_FIELDS})


def get_policy(s: Session, grant_id: int) -> AutoPolicy:
    if s.get(Grant, grant_id) is None:
        raise NotFound(f"no grant {grant_id}")
    return policy_of(s.get(GrantAuto, grant_id))


def set_policy(s: Session, grant_id: int, policy: AutoPolicy, actor: str, now: float) -> None:
    if s.get(Grant, grant_id) is None:
        raise NotFound(f"no grant {grant_id}")
    row = s.get(GrantAuto, grant_id)
    if row is None:
        row = GrantAuto(grant_id=grant_id, updated_at=now, updated_by=actor)
        s.add(row)
    for k, v in asdict(policy).items():
        setattr(row, k, v)
    row.updated_at, row.updated_by = now, actor


def automation_on(s: Session) -> bool:
    """The operators' global switch; no row is on."""
    row = s.get(AutomationSwitch, GLOBAL)
    return row is None or row.enabled


def set_automation(s: Session, enabled: bool, actor: str, now: float) -> None:
    row = s.get(AutomationSwitch, GLOBAL)
    if row is None:
        s.add(AutomationSwitch(name=GLOBAL, enabled=enabled, changed_at=now, changed_by=actor))
    else:
        row.enabled, row.changed_at, row.changed_by = enabled, now, actor


def auto_grants(s: Session, now: float, grant_ids: list[int] | None = None) -> list[AutoGrant]:
    """Automation-enabled grants usable now: not revoked, inside their validity, owner enabled."""
    q = (
        select(Grant, GrantAuto, Principal)
        .join(GrantAuto, GrantAuto.grant_id == Grant.id)
        .join(Principal, Principal.id == Grant.principal_id)
        .where(
            GrantAuto.enabled.is_(True),
            Grant.revoked_at.is_(None),
            Principal.disabled.is_(False),
            (Grant.valid_from.is_(None)) | (Grant.valid_from <= now),
            (Grant.valid_until.is_(None)) | (Grant.valid_until > now),
        )
        .order_by(Grant.id)
    )
    if grant_ids is not None:
        q = q.where(Grant.id.in_(grant_ids))
    out = []
    for g, a, p in s.execute(q).all():
        out.append(
            AutoGrant(
                grant_id=g.id,
                principal_id=p.id,
                principal=p.name,
                role=p.role,
                src=tuple(parse_prefix(x) for x in g.src_prefixes),
                dst=tuple(parse_prefix(x) for x in g.dst_prefixes),
                protocols=frozenset(g.protocols),
                ports=parse_ports(g.ports),
                max_duration_s=g.max_duration_s,
                policy=policy_of(a),
            )
        )
    return out


def live_auto_count(s: Session, grant_id: int) -> int:
    return (
        s.scalar(
            select(func.count()).select_from(Lane).where(Lane.trigger_grant_id == grant_id, Lane.state.in_(LIVE_STATES))
        )
        or 0
    )


@dataclass(frozen=True)
class LiveAuto:
    """A live automatic lane, with what its ends need."""

    lane_id: int
    grant_id: int
    state: str
    kind: str
    src_ip: str
    dst_ip: str | None
    protocol: str
    src_port: int | None
    dst_port: int | None
    activated_at: float | None


def live_auto_lanes(s: Session, grant_id: int | None = None) -> list[LiveAuto]:
    q = select(
        Lane.id,
        Lane.trigger_grant_id,
        Lane.state,
        Lane.trigger_kind,
        Lane.src_ip,
        Lane.dst_ip,
        Lane.protocol,
        Lane.src_port,
        Lane.dst_port,
        Lane.activated_at,
    ).where(Lane.trigger_kind.is_not(None), Lane.state.in_(LIVE_STATES))
    if grant_id is not None:
        q = q.where(Lane.trigger_grant_id == grant_id)
    return [
        LiveAuto(r[0], r[1] or 0, r[2], r[3] or "", r[4], r[5], r[6], r[7], r[8], r[9])
        for r in s.execute(q.order_by(Lane.id)).all()
    ]


def idle_limits(s: Session) -> dict[int, tuple[bool, int]]:
    """grant id -> (automation still allowed, idle_s), for every grant with a policy row."""
    on = automation_on(s)
    rows = s.execute(
        select(GrantAuto.grant_id, GrantAuto.enabled, GrantAuto.idle_s, Grant.revoked_at).join(
            Grant, Grant.id == GrantAuto.grant_id
        )
    ).all()
    return {gid: (on and bool(enabled) and revoked is None, idle) for gid, enabled, idle, revoked in rows}


def same_flow(lane: LiveAuto, s: Sighting) -> bool:
    """The live automatic lane carries exactly the sighted flow."""
    return (
        lane.src_ip == str(s.src_ip)
        and lane.dst_ip == str(s.dst_ip)
        and lane.protocol == PROTOCOLS.get(s.protocol)
        and lane.dst_port == s.dst_port
        and lane.src_port == s.src_port
    )
