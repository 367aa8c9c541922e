"""PostgreSQL only: a lane change that is several statements on SQLite, as ONE statement.

On PostgreSQL every statement is a round trip, a backend wake-up and a turn of the driver; the
split deployment pays them on a second process and over a socket (docs/benchmarks.md, "PostgreSQL
round trips per lane cycle"). A data-modifying CTE runs as one statement with the same effects as
the separate statements, in one snapshot, atomically; on an autocommit connection it is its own
transaction, so BEGIN and COMMIT go too.

The release/revoke (``end_in_one``): row lock, state check, visibility, UPDATE, audit row and the
wake-up NOTIFY (delivered at commit, as ``LaneActivation.wake_in`` does) were BEGIN + 4 + COMMIT
round trips, now 1. Anything but the plain success (no such lane, not the caller's, not live)
returns None and the caller takes the general path, which says why with the same errors as
before; nothing was written then (the CTE's UPDATE matched no row, so neither did the rest).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import Connection, text

from viplanes.lanes import states
from viplanes.store import pgbegin
from viplanes.store.lanesql import prepared
from viplanes.store.lanesql.core import lane_from_row
from viplanes.store.models import Lane


def _sql_list(names: tuple[str, ...]) -> str:
    """``'a', 'b'``: a state list inlined into the text, taken from viplanes/lanes/states.py."""
    return ", ".join(f"'{name}'" for name in names)


_END_FROM = _sql_list(states.END_FROM)  # a caller's end: only a live lane moves
_CARRIED = _sql_list(states.CARRIED)  # its flows go: the controllers are woken
_RECORD_FROM = _sql_list(states.RECORD_FROM)  # an outcome is written only over installing
_ACTIVE = _sql_list((states.ACTIVE,))

# FOR UPDATE in ``locked``: the row as the last committed change left it (READ COMMITTED re-reads
# a row it had to wait for), the same lock ``lane_for_change(lock=True)`` took.
_END = text(f"""
WITH locked AS (
    SELECT id, state FROM lanes WHERE id = :lane_id FOR UPDATE
), moved AS (
    UPDATE lanes SET state = :state, reason = :reason, ended_at = :ended_at
    FROM locked
    WHERE lanes.id = locked.id AND locked.state IN ({_END_FROM})
      AND (CAST(:operator AS boolean) OR lanes.principal_id = :caller_id)
    RETURNING lanes.*, locked.state AS was
), audited AS (
    INSERT INTO audit_events (at, actor, action, target, decision, reason)
    SELECT :now, :actor, :action, 'lane:' || id, 'done', '' FROM moved
), woken AS (
    SELECT pg_notify(:channel, 'ended:' || id) FROM moved
    WHERE was IN ({_CARRIED}) AND :channel <> ''
)
SELECT moved.*, principals.name AS owner_name, (SELECT count(*) FROM woken) AS woken
FROM moved JOIN principals ON principals.id = moved.principal_id
""")


def end_in_one(
    conn: Connection,
    lane_id: int,
    to: str,
    reason: str,
    now: float,
    actor: str,
    action: str,
    caller_id: int,
    operator: bool,
    channel: str | None,
) -> tuple[Lane, str, bool] | None:
    """End a live lane the caller may see: (the lane as ended, its state before, woken). ``to``:
    released or revoked (``states.ending``); ``channel``: NOTIFY ``ended:<id>`` there if it was
    installing or active. None: nothing changed."""
    row = (
        conn.execute(
            _END,
            {
                **states.ending(to, reason, now),
                "lane_id": lane_id,
                "now": now,
                "actor": actor,
                "action": action,
                "caller_id": caller_id,
                "operator": operator,
                "channel": channel or "",
            },
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    values = dict(row)
    was, woken = values.pop("was"), bool(values.pop("woken"))
    return lane_from_row(values, values.pop("owner_name")), was, woken


# The outcomes of one hand-off round (``record_in_one``): every lane's conditional UPDATE (only an
# ``installing`` row moves, as ``record_activation``), its audit row and the API processes'
# done-NOTIFY (``viplanes.cluster.handoff.notify_done``'s payload, built here from what moved) as one
# statement over arrays, one element per lane. A NULL element leaves that column as it was.
_RECORD = text(f"""
WITH v AS (
    SELECT * FROM unnest(CAST(:ids AS integer[]), CAST(:states AS text[]), CAST(:reasons AS text[]),
                         CAST(:activated AS double precision[]), CAST(:ended AS double precision[]),
                         CAST(:ms AS double precision[]), CAST(:outcomes AS text[]), CAST(:whys AS text[]))
        AS v(id, state, reason, activated_at, ended_at, ms, outcome, why)
), moved AS (
    UPDATE lanes SET state = coalesce(v.state, lanes.state), reason = coalesce(v.reason, lanes.reason),
        activated_at = coalesce(v.activated_at, lanes.activated_at),
        ended_at = coalesce(v.ended_at, lanes.ended_at), activation_ms = v.ms
    FROM v
    WHERE lanes.id = v.id AND lanes.state IN ({_RECORD_FROM})
    RETURNING lanes.id, lanes.state, v.outcome, v.why
), audited AS (
    INSERT INTO audit_events (at, actor, action, target, decision, reason)
    SELECT :now, 'system', 'lane.activate', 'lane:' || id, outcome, why FROM moved ORDER BY id
), woken AS (
    SELECT pg_notify(:channel, string_agg(id || '=' || state
                                          || CASE WHEN state = {_ACTIVE} THEN :at ELSE '' END, ','))
    FROM moved WHERE :channel <> '' HAVING count(*) > 0
)
SELECT id, state, (SELECT count(*) FROM woken) AS woken FROM moved
""")
RECORD_MAX = 150  # lanes per statement: the NOTIFY payload (~35 bytes a lane) stays below 8000


def record_in_one(
    conn: Connection, outcomes: list[tuple[int, dict[str, object], str, str]], now: float, channel: str
) -> dict[int, str]:
    """Record a round's outcomes, audit them and NOTIFY ``channel`` (none when empty: ``serve``'s
    one lane, whose data plane is in-process) at once (autocommit: its own transaction). ``outcomes``: (lane id, the columns to set, audit decision, audit reason), at
    most ``RECORD_MAX``. Returns lane id -> new state for the rows that moved (still installing
    when they did not: ended meanwhile)."""

    def column(key: str) -> list[object]:
        return [values.get(key) for _, values, _, _ in outcomes]

    rows = conn.execute(
        _RECORD,
        {
            "ids": [lane_id for lane_id, _, _, _ in outcomes],
            "states": column("state"),
            "reasons": column("reason"),
            "activated": column("activated_at"),
            "ended": column("ended_at"),
            "ms": column("activation_ms"),
            "outcomes": [o for _, _, o, _ in outcomes],
            "whys": [why[:2000] for _, _, _, why in outcomes],
            "now": now,
            "channel": channel,
            "at": f"@{now!r}",
        },
    ).all()
    return {int(row[0]): str(row[1]) for row in rows}


@functools.lru_cache(maxsize=8)
def _insert_text(columns: tuple[str, ...]) -> str:
    """INSERT the lane, its ``lane.request`` audit row and (``channel`` not empty) the
    controllers' ``lane:<id>`` wake-up, delivered at commit: one statement for three, as pyformat
    text for psycopg2 (``insert_at_commit`` serialises the JSON columns)."""
    names = ", ".join(columns)
    binds = ", ".join(f"%({c})s" for c in columns)
    return f"""
WITH lane AS (
    INSERT INTO lanes ({names}) VALUES ({binds}) RETURNING id
), audited AS (
    INSERT INTO audit_events (at, actor, action, target, decision, reason)
    SELECT %(audit_at)s, %(audit_actor)s, 'lane.request', 'lane:' || id, 'allow', %(audit_reason)s FROM lane
), woken AS (
    SELECT pg_notify(%(channel)s, 'lane:' || id) FROM lane WHERE %(channel)s <> ''
)
SELECT id, (SELECT count(*) FROM woken) AS woken FROM lane
"""


def insert_at_commit(
    conn: Connection, values: dict[str, Any], now: float, actor: str, reason: str, channel: str | None
) -> Lane:
    """``insert_lane`` + ``add_audit(..., "lane.request", ..., "allow", reason)`` + the wake-up
    NOTIFY on ``channel`` (if any) as one statement that rides in front of the transaction's
    COMMIT (``pgbegin.ride``): ``<insert>; COMMIT`` is one message. ``values`` carry the row's id
    (``gather``'s ``next_id``), so the lane is known, and can be claimed, before it is sent. A
    transient ``Lane`` holding what will be written; an error in the INSERT fails the COMMIT."""
    columns = tuple(sorted(values))
    params = {**values, "audit_at": now, "audit_actor": actor, "audit_reason": reason[:2000], "channel": channel or ""}
    for column in ("dst_nets", "dst_ports"):  # the JSON columns, as the statement's JSON binds would
        if params.get(column) is not None:
            params[column] = json.dumps(params[column])
    pgbegin.ride(conn, prepared.inline(conn, _insert_text(columns), params))
    return lane_from_row(dict(values))


def notify_in(conn: Connection, channel: str, payload: str) -> None:
    """NOTIFY ``channel`` inside the caller's transaction: PostgreSQL delivers it at the commit,
    so a wake-up can never run ahead of the row it announces."""
    conn.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": channel, "p": payload})
