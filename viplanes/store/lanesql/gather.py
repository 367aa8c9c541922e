"""PostgreSQL only: everything a lane request's decision reads, in one message.

A request read its grants (row-locked), then took the advisory locks with the quota count, then
read the overlap candidates with the lane-pool address: three round trips, each a backend
wake-up and a turn of SQLAlchemy and psycopg2 (issue 44: ~1 ms of wall time each on this
machine, for ~0.25-0.45 ms of the server's own work). Here the grants' row locks and the advisory
locks ride in front of one statement that reads the grants, the live lanes per grant, the
candidates and the address (``pgbegin.ride``): ``BEGIN; <lock grants>; <advisory locks>; <read>``.

Why it is as safe as three messages: in READ COMMITTED every statement of a message takes its own
snapshot when it starts, so the read starts after both locks were granted and sees every lane
committed by a transaction that held them (``tests/integration/test_pg_gather.py`` holds a lock
from another connection and shows it). The lock order is unchanged: grant rows in id order, then
the overlap lock, then the pool's. The read locks the usable grants again (held already: no
wait), so a grant committed between the two statements is locked before it can allow a lane.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, cast, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import REGCLASS, aggregate_order_by

from viplanes.policy.rules import GrantRule
from viplanes.store import pgbegin
from viplanes.store.lanesql import prepared
from viplanes.store.lanesql.core import LANES, LIVE, USABLE, grant_rule


class Gathered(NamedTuple):
    """What ``gather`` read, in the shapes the separate reads return."""

    rules: list[GrantRule]  # usable_grant_rules
    live: dict[int, int]  # live_counts over every usable grant
    candidates: list[list[Any]]  # overlap_query's rows, for first_overlap
    address: str | None  # the lane-pool lookup's answer (None: exhausted, or no lookup asked)
    next_id: int  # an id from the lanes' sequence, for the row if one is written (insert_at_commit)


@functools.cache
def _lock_grants(with_groups: bool) -> str:
    """The usable grants, row-locked in id order, as pyformat text (its rows are not read)."""
    return str(USABLE[(with_groups, True)].compile(dialect=postgresql.dialect()))


@functools.lru_cache(maxsize=64)
def _read_text(query: Any, lookup: Any, with_groups: bool) -> tuple[str, dict[str, Any]]:
    """``_read`` as pyformat text and its parameters' defaults (the values written in it): run by
    ``exec_driver_sql``, which skips SQLAlchemy's cache key walk of this nest of subqueries
    (~0.3 ms of CPU per request); the engine's prepare and BEGIN hooks still see it."""
    compiled = _read(query, lookup, with_groups).compile(dialect=postgresql.dialect())
    return str(compiled), dict(compiled.params)


def _read(query: Any, lookup: Any, with_groups: bool) -> Any:
    """The usable grants (locked again: no wait), the live lanes per grant whose window meets
    [start, end), ``query``'s candidate rows, an id for the lane and ``lookup``'s address."""
    usable = USABLE[(with_groups, True)].cte("usable")
    grants = select(func.json_agg(aggregate_order_by(func.json_build_array(*usable.c), usable.c.id))).scalar_subquery()
    per_grant = (
        select(LANES.c.grant_id, func.count().label("n"))
        .where(
            LANES.c.grant_id.in_(select(usable.c.id)),
            LIVE,
            LANES.c.starts_at < bindparam("end"),
            LANES.c.expires_at > bindparam("start"),
        )
        .group_by(LANES.c.grant_id)
        .subquery("per_grant")
    )
    live = select(func.json_object_agg(per_grant.c.grant_id, per_grant.c.n)).scalar_subquery()
    candidates = query.subquery("candidates")
    found = select(func.json_agg(func.json_build_array(*candidates.c))).scalar_subquery()
    next_id = func.nextval(cast(bindparam("lane_ids"), REGCLASS))  # _sequence: no pg_depend scan per request
    columns = [grants, live, found, next_id]
    if lookup is not None:
        columns.append(lookup.scalar_subquery())
    return select(*columns)


_SEQUENCE = "viplanes_lane_ids"  # Connection.info: the name of the sequence of lanes.id


def _sequence(conn: Connection) -> str:
    """The sequence behind ``lanes.id``, asked once per connection: ``pg_get_serial_sequence``
    scans pg_depend, which in every request cost ~0.2 ms of the server's time."""
    name = conn.info.get(_SEQUENCE)
    if name is None:
        name = conn.info[_SEQUENCE] = str(
            conn.exec_driver_sql(f"SELECT pg_get_serial_sequence('{LANES.name}', 'id')").scalar()
        )
    return name


def gather(
    conn: Connection,
    principal_id: int,
    now: float,
    with_groups: bool,
    keys: list[int],
    query: Any,
    params: dict[str, Any],
    lookup: Any,
    lookup_params: dict[str, Any],
) -> Gathered:
    """Lock the principal's usable grants, take the advisory locks ``keys`` in order, then read
    (``Gathered``): one message, the first of the caller's transaction (``pgbegin.transaction``).
    ``params`` are ``overlap_query``'s (its ``start`` and ``end`` bound the quota's count too)."""
    sequence = _sequence(conn)
    pgbegin.ride(conn, prepared.inline(conn, _lock_grants(with_groups), {"principal_id": principal_id, "now": now}))
    if keys:
        pgbegin.ride(conn, "SELECT " + ", ".join(f"pg_advisory_xact_lock({int(k)})" for k in keys))
    sql, defaults = _read_text(query, lookup, with_groups)
    values = {**defaults, **params, **lookup_params, "principal_id": principal_id, "now": now, "lane_ids": sequence}
    row = conn.exec_driver_sql(sql, values).one()
    rules = [grant_rule(r) for r in row[0] or []]
    live = {int(gid): int(n) for gid, n in (row[1] or {}).items()}
    return Gathered(rules, live, list(row[2] or []), row[4] if lookup is not None else None, int(row[3]))
