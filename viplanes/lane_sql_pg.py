"""PostgreSQL only: a lane change that is several statements on SQLite, as ONE statement.

On PostgreSQL every statement is a round trip, a backend wake-up and a turn of the driver; the
split deployment pays them on a second process and over a socket (docs/benchmarks.md, "PostgreSQL
round trips per lane cycle"). A data-modifying CTE runs as one statement with the same effects as
the separate statements, in one snapshot, atomically; on an autocommit connection it is its own
transaction, so BEGIN and COMMIT go too.

The release/revoke (``end_in_one``): row lock, state check, visibility, UPDATE, audit row and the
wake-up NOTIFY (delivered at commit, as ``LaneActivation._wake_in`` does) were BEGIN + 4 + COMMIT
round trips, now 1. Anything but the plain success (no such lane, not the caller's, not live)
returns None and the caller takes the general path, which says why with the same errors as
before; nothing was written then (the CTE's UPDATE matched no row, so neither did the rest).
"""
from __future__ import annotations

from sqlalchemy import Connection, text

from viplanes.lane_sql import lane_from_row
from viplanes.models import LIVE_STATES, Lane

_LIVE = ", ".join(f"'{state}'" for state in sorted(LIVE_STATES))

# FOR UPDATE in ``locked``: the row as the last committed change left it (READ COMMITTED re-reads
# a row it had to wait for), the same lock ``lane_for_change(lock=True)`` took.
_END = text(f"""
WITH locked AS (
    SELECT id, state FROM lanes WHERE id = :lane_id FOR UPDATE
), moved AS (
    UPDATE lanes SET state = :to, reason = :reason, ended_at = :now
    FROM locked
    WHERE lanes.id = locked.id AND locked.state IN ({_LIVE})
      AND (CAST(:operator AS boolean) OR lanes.principal_id = :caller_id)
    RETURNING lanes.*, locked.state AS was
), audited AS (
    INSERT INTO audit_events (at, actor, action, target, decision, reason)
    SELECT :now, :actor, :action, 'lane:' || id, 'done', '' FROM moved
), woken AS (
    SELECT pg_notify(:channel, 'ended:' || id) FROM moved
    WHERE was IN ('installing', 'active') AND :channel <> ''
)
SELECT moved.*, principals.name AS owner_name, (SELECT count(*) FROM woken) AS woken
FROM moved JOIN principals ON principals.id = moved.principal_id
""")


def end_in_one(conn: Connection, lane_id: int, to: str, reason: str, now: float, actor: str, action: str,
               caller_id: int, operator: bool, channel: str | None) -> tuple[Lane, str, bool] | None:
    """End a live lane the caller may see: (the lane as ended, its state before, woken). ``channel``:
    NOTIFY ``ended:<id>`` there if it was installing or active. None: nothing changed."""
    row = conn.execute(_END, {"lane_id": lane_id, "to": to, "reason": reason, "now": now, "actor": actor,
                              "action": action, "caller_id": caller_id, "operator": operator,
                              "channel": channel or ""}).mappings().first()
    if row is None:
        return None
    values = dict(row)
    was, woken = values.pop("was"), bool(values.pop("woken"))
    return lane_from_row(values, values.pop("owner_name")), was, woken
