"""The lifecycle clock reads before it writes (issue 13): a tick with nothing due takes no write
transaction, so the twice-a-second clock never holds SQLite's writer lock (or PostgreSQL row
locks) in front of a request; a tick with something due still does all of it."""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import event, update

from tests.support.clock import T0
from tests.support.store import campus_topology, lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.lanesql.core import LANES, lanes_due


def _statements(db: Any) -> tuple[list[str], Any]:
    seen: list[str] = []

    def grab(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(" ".join(statement.split()).upper())

    event.listen(db.engine, "before_cursor_execute", grab)
    return seen, lambda: event.remove(db.engine, "before_cursor_execute", grab)


def test_an_idle_tick_reads_once_and_a_due_tick_still_starts_and_expires(db):
    callers = principals(db, ("alice", "researcher"))
    clock = [T0]
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    now_lane, _ = mgr.request(callers["alice"], lane_input())
    later, _ = mgr.request(callers["alice"], lane_input(port=9001, start_at=T0 + 30))
    seen, stop = _statements(db)
    try:
        clock[0] = T0 + 10
        assert mgr.tick() == {"started": 0, "expired": 0}
        idle = list(seen)
        seen.clear()
        clock[0] = T0 + 30
        assert mgr.tick() == {"started": 1, "expired": 0}
        due = list(seen)
    finally:
        stop()
    # one SELECT (SQLite: in a deferred BEGIN, which takes no lock); no writer lock, no row lock
    body = [s for s in idle if s != "BEGIN"]
    assert len(body) == 1 and body[0].startswith("SELECT") and "FOR UPDATE" not in body[0], idle
    assert any(s == "BEGIN IMMEDIATE" or "FOR UPDATE" in s for s in due), due
    assert set(dp.active) == {now_lane.id, later.id}
    clock[0] = T0 + 30 + 601
    assert mgr.tick() == {"started": 0, "expired": 2}
    assert dp.active == {}


def test_lanes_due_agrees_with_what_tick_would_do(db):
    """Every state against start and end times before, at and after ``now``: due exactly when a
    scheduled lane's start has come or a carried (installing/active) lane's end has."""
    callers = principals(db, ("alice", "researcher"), max_lanes=50, ports=("1-65535",))
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    lane, _ = mgr.request(callers["alice"], lane_input(port=7000))
    states = ("scheduled", "installing", "active", "released", "expired", "revoked", "failed")
    offsets = (-1.0, 0.0, 1.0)
    for state, start_off, end_off in itertools.product(states, offsets, offsets):
        now = T0 + 100
        with db.write_connection() as conn:
            conn.execute(
                update(LANES)
                .where(LANES.c.id == lane.id)
                .values(state=state, starts_at=now + start_off, expires_at=now + end_off)
            )
            got = lanes_due(conn, now)
        want = (state == "scheduled" and start_off <= 0) or (state in ("installing", "active") and end_off <= 0)
        assert got == want, (state, start_off, end_off)
