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

import functools
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Connection, Select, Table, bindparam, exists, func, insert, literal_column, or_, select, update
from sqlalchemy.orm import Session, attributes

from viplanes.lanes import states
from viplanes.policy.rules import GrantRule, parse_ports, parse_prefix
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.models import AuditEvent, Grant, GroupMembership, Lane, Principal

# ``__table__`` is typed as a FromClause; for a mapped class it is the Table itself.
LANES = cast(Table, Lane.__table__)
GRANTS = cast(Table, Grant.__table__)
AUDIT = cast(Table, AuditEvent.__table__)
PRINCIPALS = cast(Table, Principal.__table__)
MEMBERSHIPS = cast(Table, GroupMembership.__table__)

# Statements are built once, with bind parameters: building one costs 0.2-0.3 ms of Python
# (operator overloading, coercion, cache key) against ~0.05 ms to execute a built one. The live
# states are inlined (``state IN ('requested', ...)``), not an expanding parameter list that is
# re-rendered on every execution. Every state in a statement comes from viplanes/lanes/states.py.


def state_in(names: Sequence[str]) -> Any:
    """``state IN ('a', ...)`` (``state = 'a'`` for one) with the states inlined: built once, no
    parameter list to render."""
    if len(names) == 1:
        return LANES.c.state == literal_column(f"'{names[0]}'")
    return LANES.c.state.in_([literal_column(f"'{name}'") for name in names])


LIVE = state_in(states.LIVE)

_GRANT_COLUMNS = (
    GRANTS.c.id,
    GRANTS.c.src_prefixes,
    GRANTS.c.dst_prefixes,
    GRANTS.c.protocols,
    GRANTS.c.ports,
    GRANTS.c.max_duration_s,
    GRANTS.c.max_rate_mbps,
    GRANTS.c.max_lanes,
    GRANTS.c.valid_from,
    GRANTS.c.valid_until,
    GRANTS.c.revoked_at,
)
# the groups the principal's tokens prove membership of right now (viplanes/domain/memberships.py)
_FRESH_GROUPS = select(MEMBERSHIPS.c.group_name).where(
    MEMBERSHIPS.c.principal_id == bindparam("principal_id"), MEMBERSHIPS.c.until > bindparam("now")
)
_USABLE_GRANTS_OWN = (
    select(*_GRANT_COLUMNS)
    .where(
        GRANTS.c.principal_id == bindparam("principal_id"),
        GRANTS.c.revoked_at.is_(None),
        GRANTS.c.valid_until.is_(None) | (GRANTS.c.valid_until > bindparam("now")),
    )
    .order_by(GRANTS.c.id)
)
# with the grants of the groups the principal's provider tokens prove now (a provider credential only)
_USABLE_GRANTS = (
    select(*_GRANT_COLUMNS)
    .where(
        or_(GRANTS.c.principal_id == bindparam("principal_id"), GRANTS.c.group_name.in_(_FRESH_GROUPS)),
        GRANTS.c.revoked_at.is_(None),
        GRANTS.c.valid_until.is_(None) | (GRANTS.c.valid_until > bindparam("now")),
    )
    .order_by(GRANTS.c.id)
)
USABLE = {  # (with the groups, row-locked): the grants a request may use
    (False, False): _USABLE_GRANTS_OWN,
    (False, True): _USABLE_GRANTS_OWN.with_for_update(),
    (True, False): _USABLE_GRANTS,
    (True, True): _USABLE_GRANTS.with_for_update(),
}


def _live_counts_select(grant_ids: Any) -> Select[Any]:
    """Live lanes per grant in ``grant_ids`` (an IN list) whose window overlaps [start, end)."""
    return (
        select(LANES.c.grant_id, func.count())
        .where(
            LANES.c.grant_id.in_(grant_ids),
            LIVE,
            LANES.c.starts_at < bindparam("end"),
            LANES.c.expires_at > bindparam("start"),
        )
        .group_by(LANES.c.grant_id)
    )


_LIVE_COUNTS = _live_counts_select(bindparam("grant_ids", expanding=True))
_LIVE_COUNTS_EXCLUDING = _LIVE_COUNTS.where(LANES.c.id != bindparam("exclude"))
_FIXED_IN_MAX = 8  # live counts for up to this many grants use one bind per grant (built once per count)


@functools.cache
def _live_counts_of(n: int, excluding: bool) -> Select[Any]:
    stmt = _live_counts_select([bindparam(f"grant_{i}") for i in range(n)])
    return stmt.where(LANES.c.id != bindparam("exclude")) if excluding else stmt


_INSERT_LANE = insert(LANES)
_INSERT_AUDIT = insert(AUDIT)
# the statements that move a lane: each guarded by the states its event leaves (states.sources)
_RECORD_ACTIVATION = update(LANES).where(LANES.c.id == bindparam("lane_id_"), state_in(states.RECORD_FROM))
_END_LANE = update(LANES).where(LANES.c.id == bindparam("lane_id_"), state_in(states.END_FROM))
# ``Lane.id``, an ORM entity: the Session flushes its pending changes (the grant's revoked_at) first
_GRANT_LANES = select(Lane.id).where(Lane.grant_id == bindparam("grant_id"), state_in(states.sources(states.REVOKE)))
_PRINCIPAL_LANES = select(Lane.id).where(
    Lane.principal_id == bindparam("principal_id"), state_in(states.sources(states.REVOKE))
)
_END_LANES = update(LANES).where(
    LANES.c.id.in_(bindparam("ids", expanding=True)), state_in(states.sources(states.REVOKE))
)
_LANE_WITH_OWNER = (
    select(LANES, PRINCIPALS.c.name.label("owner_name"))
    .join(PRINCIPALS, PRINCIPALS.c.id == LANES.c.principal_id)
    .where(LANES.c.id == bindparam("lane_id_"))
)
_OWNER_AND_STATE = select(LANES.c.principal_id, LANES.c.state).where(LANES.c.id == bindparam("lane_id_"))
_LANE_WITH_OWNER_LOCKED = _LANE_WITH_OWNER.with_for_update(of=LANES)
_INSTALLING = select(LANES).where(state_in((states.INSTALLING,)), LANES.c.expires_at > bindparam("now"))
# what ``tick`` may have to do: a scheduled lane whose start has come, a carried lane whose end has
_TICK_DUE = select(
    or_(
        exists().where(state_in((states.SCHEDULED,)), LANES.c.starts_at <= bindparam("now")),
        exists().where(state_in(states.CARRIED), LANES.c.expires_at <= bindparam("now")),
    )
)


def usable_grant_rules(
    conn: Connection, principal_id: int, now: float, for_update: bool, with_groups: bool = False
) -> list[GrantRule]:
    """The principal's grants that could allow a lane now or later, as rules, row-locked in id
    order on PostgreSQL (two requests never deadlock on each other's grants). ``with_groups``:
    the request's credential carries the provider's groups, so fresh group grants count too."""
    rows = rawsql.rows(conn, USABLE[(with_groups, for_update)], {"principal_id": principal_id, "now": now})
    return [grant_rule(r) for r in rows]


def grant_rule(r: Sequence[Any]) -> GrantRule:
    """A row of ``USABLE`` as the policy's rule (also from JSON: ``gather``, whose floats may
    arrive as integers)."""
    return GrantRule(
        grant_id=int(r[0]),
        src_prefixes=tuple(parse_prefix(x) for x in r[1]),
        dst_prefixes=tuple(parse_prefix(x) for x in r[2]),
        protocols=frozenset(r[3]),
        ports=parse_ports(r[4]),
        max_duration_s=r[5],
        max_rate_mbps=_float(r[6]),
        max_lanes=r[7],
        valid_from=_float(r[8]),
        valid_until=_float(r[9]),
        revoked=r[10] is not None,
    )


def _float(x: float | None) -> float | None:
    return None if x is None else float(x)


def live_counts(
    conn: Connection, grant_ids: Sequence[int], start: float, end: float, exclude: int | None = None
) -> dict[int, int]:
    """Live lanes per grant whose time window overlaps [start, end): one GROUP BY."""
    if not grant_ids:
        return {}
    params: dict[str, Any] = {"start": start, "end": end}
    if exclude is not None:
        params["exclude"] = exclude
    if len(grant_ids) <= _FIXED_IN_MAX:  # one bind per grant: no expanding list, so raw on SQLite
        params.update({f"grant_{i}": gid for i, gid in enumerate(grant_ids)})
        stmt = _live_counts_of(len(grant_ids), exclude is not None)
    else:
        params["grant_ids"] = list(grant_ids)
        stmt = _LIVE_COUNTS if exclude is None else _LIVE_COUNTS_EXCLUDING
    return {gid: n for gid, n in rawsql.rows(conn, stmt, params)}


def insert_lane(conn: Connection, values: dict[str, Any]) -> Lane:
    """INSERT the row; the answer is a transient ``Lane`` holding what was written."""
    _, lane_id = rawsql.write(conn, _INSERT_LANE, values)
    assert lane_id is not None  # an INSERT of one row always has one
    return _transient_lane({**values, "id": lane_id})


_LANE_MANAGER = Lane._sa_class_manager  # type: ignore[attr-defined]


def _transient_lane(values: dict[str, Any]) -> Lane:
    """A transient ``Lane`` holding ``values``, made by the class manager with the values as its
    attribute dict rather than by ``Lane(**values)``, whose instrumented ``__init__`` sets the
    columns one by one: 16.5 -> 0.8 us per lane (``installing_lanes``); later assignments are
    instrumented as usual."""
    lane = _LANE_MANAGER.new_instance()
    lane.__dict__.update(values)
    return cast(Lane, lane)


def lane_from_row(values: dict[str, Any], owner_name: str | None = None) -> Lane:
    """A transient ``Lane`` from a row of ``lanes`` (with its owner's name for the answer)."""
    lane = _transient_lane(values)
    if owner_name is not None:  # lane_dict names the owner
        attributes.set_committed_value(lane, "principal", Principal(id=values["principal_id"], name=owner_name))
    return lane


def add_audit(
    conn: Connection, now: float, actor: str, action: str, target: str, decision: str, reason: str = ""
) -> None:
    rawsql.write(
        conn,
        _INSERT_AUDIT,
        {"at": now, "actor": actor, "action": action, "target": target, "decision": decision, "reason": reason[:2000]},
    )


def record_activation(conn: Connection, lane_id: int, values: dict[str, object]) -> bool:
    """One conditional UPDATE of an activation's outcome (``values``: ``states.change`` from
    installing): the lane moves only if nobody ended it while it was installing."""
    return rawsql.write(conn, _RECORD_ACTIVATION, {**values, "lane_id_": lane_id})[0] == 1


def lane_row_for_change(conn: Connection, lane_id: int, lock: bool) -> dict[str, Any] | None:
    """The lane's row with ``owner_name`` (row-locked on PostgreSQL when ``lock``), or None: a
    plain dict, so a caller can decide from it before paying for an ORM object."""
    return rawsql.first_mapping(conn, _LANE_WITH_OWNER_LOCKED if lock else _LANE_WITH_OWNER, {"lane_id_": lane_id})


def owner_and_state(conn: Connection, lane_id: int) -> tuple[int, str] | None:
    """(owner's principal id, state) of a lane, or None: what ``end`` decides its early deletes on."""
    found = rawsql.rows(conn, _OWNER_AND_STATE, {"lane_id_": lane_id})
    return None if not found else (found[0][0], found[0][1])


def lane_for_change(conn: Connection, lane_id: int, lock: bool) -> Lane | None:
    """The lane with its owner's name (row-locked on PostgreSQL when ``lock``), or None."""
    values = lane_row_for_change(conn, lane_id, lock)
    if values is None:
        return None
    return lane_from_row(values, values.pop("owner_name"))


def end_lane(conn: Connection, lane_id: int, values: dict[str, object]) -> bool:
    """End a live lane (``values``: ``states.move`` to released or revoked); False if it was not."""
    return rawsql.write(conn, _END_LANE, {**values, "lane_id_": lane_id})[0] == 1


def end_grant_lanes(s: Session, grant_id: int, reason: str, now: float, actor: str = "system") -> list[int]:
    """Revoke the live lanes of a grant in ``s``'s transaction (after its pending changes are
    flushed, as any statement of a Session): the ids of the lanes it ended."""
    return _revoke_selected(s, _GRANT_LANES, {"grant_id": grant_id}, reason, now, actor)


def end_principal_lanes(s: Session, principal_id: int, reason: str, now: float, actor: str = "system") -> list[int]:
    """Revoke the live lanes a principal owns (it is being disabled), as ``end_grant_lanes``."""
    return _revoke_selected(s, _PRINCIPAL_LANES, {"principal_id": principal_id}, reason, now, actor)


def _revoke_selected(
    s: Session, select_ids: Any, params: dict[str, Any], reason: str, now: float, actor: str
) -> list[int]:
    """End the selected lanes (bookings too: ``scheduled`` is live) with one audit row each, by
    ``actor``, so every lane's own history says why it ended."""
    ids = [row[0] for row in s.execute(select_ids, params)]
    if ids:
        s.execute(_END_LANES, {**states.ending(states.REVOKED, reason, now), "ids": ids})
        rows = [
            {"at": now, "actor": actor, "action": "lane.revoke", "target": f"lane:{i}", "decision": "done"} for i in ids
        ]
        s.execute(_INSERT_AUDIT, [{**row, "reason": reason[:2000]} for row in rows])
    return ids


def installing_lanes(conn: Connection, now: float) -> list[Lane]:
    """Lanes waiting to be installed (``recover``, every hand-off round of the split's
    controller), as transient ``Lane``s: one statement. Each is made by the class manager with
    the row as its attribute dict, not by ``Lane(**values)``, whose instrumented ``__init__``
    sets the 26 columns one by one: 16.5 -> 0.8 us per lane (timeit); the object is the same
    (transient, every column loaded, later assignments instrumented as usual)."""
    lanes = []
    for row in conn.execute(_INSTALLING, {"now": now}).mappings():
        lanes.append(_transient_lane(dict(row)))
    return lanes


def lanes_due(conn: Connection, now: float) -> bool:
    """Whether a lane is due to start or to end at ``now``: one read, so the clock's idle ticks
    (twice a second) take no write transaction, hence never hold SQLite's writer lock (or
    PostgreSQL row locks) in front of a request."""
    return bool(rawsql.scalar(conn, _TICK_DUE, {"now": now}))


def end_selected_lanes(
    s: Session, select_ids: Any, params: dict[str, Any], reason: str, now: float, actor: str = "system"
) -> list[int]:
    """Revoke the live lanes ``select_ids`` picks (one ``Lane.id`` column), as ``end_grant_lanes``:
    the door for other store modules (group memberships: viplanes/store/memberships.py)."""
    return _revoke_selected(s, select_ids, params, reason, now, actor)
