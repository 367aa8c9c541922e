"""Group membership evidence in the database: renewed from verified tokens, lanes ended when it
is gone or runs out. The decisions are pure (``viplanes.domain.memberships``); this is their SQL.

Only groups some grant names are recorded: a provider may send hundreds of groups per person
(Entra ID), and a membership no grant uses decides nothing here. Every granted group is recorded,
though, present or absent: a token lacking one says "not a member as of its ``iat``", so a token
saved from before a removal proves nothing afterwards even where the person never held it here.
"""

from __future__ import annotations

from sqlalchemy import and_, bindparam, exists, select
from sqlalchemy.orm import Session

from viplanes.domain.memberships import Evidence, TokenGroups, plan_renewal
from viplanes.lanes import states
from viplanes.store.lanesql.core import end_selected_lanes, state_in
from viplanes.store.models import Grant, GroupMembership, Lane

ACTOR = "oidc"

_LIVE = state_in(states.sources(states.REVOKE))
# the principal's live lanes that hold only through a grant to this group
_GROUP_LANES = select(Lane.id).where(
    Lane.principal_id == bindparam("principal_id"),
    _LIVE,
    Lane.grant_id.in_(select(Grant.id).where(Grant.group_name == bindparam("group_name"))),
)
# every live lane under a group grant whose holder has no fresh evidence of that group
_LAPSED = (
    select(Lane.id, Grant.group_name)
    .join(Grant, Grant.id == Lane.grant_id)
    .where(
        _LIVE,
        Grant.group_name.is_not(None),
        ~exists().where(
            and_(
                GroupMembership.principal_id == Lane.principal_id,
                GroupMembership.group_name == Grant.group_name,
                GroupMembership.until > bindparam("now"),
            )
        ),
    )
)
_BY_IDS = select(Lane.id).where(Lane.id.in_(bindparam("ids", expanding=True)), _LIVE)


def fresh_groups(s: Session, principal_id: int, now: float) -> list[str]:
    """The groups the principal's tokens prove membership of at ``now``."""
    return list(
        s.scalars(
            select(GroupMembership.group_name).where(
                GroupMembership.principal_id == principal_id, GroupMembership.until > now
            )
        )
    )


def granted_groups(s: Session) -> set[str]:
    """Every group some grant (revoked or not: its lanes may still be live) names."""
    return {str(g) for g in s.scalars(select(Grant.group_name).where(Grant.group_name.is_not(None)).distinct())}


def evidence_of(s: Session, principal_id: int) -> dict[str, Evidence]:
    rows = s.execute(
        select(GroupMembership.group_name, GroupMembership.until, GroupMembership.seen_iat).where(
            GroupMembership.principal_id == principal_id
        )
    )
    return {g: Evidence(until, iat) for g, until, iat in rows}


def renew(s: Session, seen: TokenGroups, grace_s: float, now: float, who: str) -> list[int]:
    """Apply what ``seen`` (a verified token) says about the principal's granted groups, in
    ``s``'s write transaction: renew, record, or (a group gone) end the group's lanes at once,
    audited. Returns the lanes to take off the switches."""
    have = evidence_of(s, seen.principal_id)
    # every granted group: one the token lacks is recorded absent too (an older token then proves nothing)
    change = plan_renewal(have, seen, granted_groups(s), grace_s)
    for group, ev in change.write.items():
        row = s.get(GroupMembership, (seen.principal_id, group))
        if row is None:
            s.add(
                GroupMembership(principal_id=seen.principal_id, group_name=group, until=ev.until, seen_iat=ev.seen_iat)
            )
        else:
            row.until, row.seen_iat = ev.until, ev.seen_iat
    s.flush()
    ended: list[int] = []
    for group in change.gone:
        reason = f"{who} is no longer in group {group} (the provider's token says so)"
        ended += end_selected_lanes(
            s, _GROUP_LANES, {"principal_id": seen.principal_id, "group_name": group}, reason, now, ACTOR
        )
    return ended


def needs_write(s: Session, seen: TokenGroups, grace_s: float) -> bool:
    """A read-only look: does ``seen`` change anything? (Most requests reuse a token: no write.)"""
    have = evidence_of(s, seen.principal_id)
    change = plan_renewal(have, seen, granted_groups(s), grace_s)
    return bool(change.write or change.gone)


def end_lapsed(s: Session, now: float) -> list[int]:
    """End every live lane under a group grant whose holder's evidence ran out (no fresh token
    before the last one's expiry + grace: removed from the group, account disabled, or simply
    gone), one audit row per lane naming the group."""
    by_group: dict[str, list[int]] = {}
    for lane_id, group in s.execute(_LAPSED, {"now": now}):
        by_group.setdefault(str(group), []).append(lane_id)  # never NULL: the WHERE says so
    ended: list[int] = []
    for group, ids in sorted(by_group.items()):
        reason = f"membership of group {group} not renewed by a fresh token (evidence ran out)"
        ended += end_selected_lanes(s, _BY_IDS, {"ids": ids}, reason, now, ACTOR)
    return ended


def any_lapsed(s: Session, now: float) -> bool:
    """A read-only look for the sweep: most sweeps find nothing and take no write transaction."""
    return s.execute(_LAPSED.limit(1), {"now": now}).first() is not None
