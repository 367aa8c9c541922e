"""The SQL of a lane request, its activation result and its release, as Core statements.

Why not the ORM here (issue 13): one request + release through the Flask app spent ~55 % of its
CPU inside SQLAlchemy, most of it the ORM's unit of work (flushing a ``Lane`` and two
``AuditEvent`` objects), ORM-enabled ``UPDATE`` evaluation and eager-joined entity loading, for
about a dozen statements. The same statements as Core on the transaction's connection skip all
of that; the rows and the transactions are unchanged (one write transaction decides, inserts and
audits; a second records the activation after the barriers; a third releases).

The answers are still ``Lane`` instances (transient: built from the values written, never
attached to a session), so everything above (views, ``spec_of``, the activation) reads them as
before.
"""
from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.orm import attributes

from viplanes.models import LIVE_STATES, AuditEvent, Grant, Lane, Principal
from viplanes.policy.rules import GrantRule, parse_ports, parse_prefix

LANES = Lane.__table__
GRANTS = Grant.__table__
AUDIT = AuditEvent.__table__
PRINCIPALS = Principal.__table__

_GRANT_COLUMNS = (GRANTS.c.id, GRANTS.c.src_prefixes, GRANTS.c.dst_prefixes, GRANTS.c.protocols,
                  GRANTS.c.ports, GRANTS.c.max_duration_s, GRANTS.c.max_rate_mbps, GRANTS.c.max_lanes,
                  GRANTS.c.valid_from, GRANTS.c.valid_until, GRANTS.c.revoked_at)


def usable_grant_rules(conn: Connection, principal_id: int, now: float, for_update: bool) -> list[GrantRule]:
    """The principal's grants that could allow a lane now or later, as rules, row-locked in id
    order on PostgreSQL (two requests never deadlock on each other's grants)."""
    q = (select(*_GRANT_COLUMNS)
         .where(GRANTS.c.principal_id == principal_id, GRANTS.c.revoked_at.is_(None),
                GRANTS.c.valid_until.is_(None) | (GRANTS.c.valid_until > now))
         .order_by(GRANTS.c.id))
    if for_update:
        q = q.with_for_update()
    return [GrantRule(grant_id=r[0], src_prefixes=tuple(parse_prefix(x) for x in r[1]),
                      dst_prefixes=tuple(parse_prefix(x) for x in r[2]), protocols=frozenset(r[3]),
                      ports=parse_ports(r[4]), max_duration_s=r[5], max_rate_mbps=r[6], max_lanes=r[7],
                      valid_from=r[8], valid_until=r[9], revoked=r[10] is not None)
            for r in conn.execute(q)]


def live_counts(conn: Connection, grant_ids: Sequence[int], start: float, end: float,
                exclude: int | None = None) -> dict[int, int]:
    """Live lanes per grant whose time window overlaps [start, end): one GROUP BY."""
    if not grant_ids:
        return {}
    q = (select(LANES.c.grant_id, func.count())
         .where(LANES.c.grant_id.in_(grant_ids), LANES.c.state.in_(LIVE_STATES),
                LANES.c.starts_at < end, LANES.c.expires_at > start)
         .group_by(LANES.c.grant_id))
    if exclude is not None:
        q = q.where(LANES.c.id != exclude)
    return {gid: n for gid, n in conn.execute(q)}


def insert_lane(conn: Connection, values: dict[str, Any]) -> Lane:
    """INSERT the row; the answer is a transient ``Lane`` holding what was written."""
    lane_id = conn.execute(insert(LANES).values(**values)).inserted_primary_key[0]
    lane = Lane(**values)
    lane.id = lane_id
    return lane


def add_audit(conn: Connection, now: float, actor: str, action: str, target: str, decision: str,
              reason: str = "") -> None:
    conn.execute(insert(AUDIT).values(at=now, actor=actor, action=action, target=target,
                                      decision=decision, reason=reason[:2000]))


def record_activation(conn: Connection, lane_id: int, values: dict[str, object]) -> bool:
    """One conditional UPDATE: the lane moves only if nobody ended it while it was installing."""
    return conn.execute(update(LANES).where(LANES.c.id == lane_id, LANES.c.state == "installing")
                        .values(**values)).rowcount == 1


def lane_for_change(conn: Connection, lane_id: int, lock: bool) -> Lane | None:
    """The lane with its owner's name (row-locked on PostgreSQL when ``lock``), or None."""
    q = (select(LANES, PRINCIPALS.c.name.label("owner_name"))
         .join(PRINCIPALS, PRINCIPALS.c.id == LANES.c.principal_id)
         .where(LANES.c.id == lane_id))
    if lock:
        q = q.with_for_update(of=LANES)
    row = conn.execute(q).mappings().first()
    if row is None:
        return None
    values = dict(row)
    owner = Principal(id=values["principal_id"], name=values.pop("owner_name"))
    lane = Lane(**values)
    attributes.set_committed_value(lane, "principal", owner)  # lane_dict names the owner
    return lane


def end_lane(conn: Connection, lane_id: int, state: str, reason: str, now: float) -> None:
    conn.execute(update(LANES).where(LANES.c.id == lane_id).values(state=state, reason=reason, ended_at=now))
