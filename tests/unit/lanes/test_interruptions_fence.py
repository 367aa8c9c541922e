"""In a controller cluster only the lease holder writes a lane's ``interrupted``/``active`` moves:
a standby, or a master deposed while its scheduler is mid-round, sees the links its own way and
must not be a second writer of lane state (issue 42)."""

from __future__ import annotations

import time

from sqlalchemy import text

from tests.support.clock import T0
from tests.support.store import campus_topology, lane_input, principals
from tests.unit.lanes.test_interruptions import WHY, HoldingDataplane, _state
from viplanes.cluster.leader import LeaderLease
from viplanes.lanes.interruptions import sync_interruptions
from viplanes.lanes.manager import LaneManager
from viplanes.lanes.scheduler import Scheduler


def _held_lane(db):  # type: ignore[no-untyped-def]
    callers = principals(db, ("alice", "researcher"))
    dp = HoldingDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: T0)
    lane, _ = mgr.request(callers["alice"], lane_input())
    dp.held = {lane.id: WHY}  # this controller's view: no usable path
    return mgr, dp, lane.id


def _depose(db, a: LeaderLease, b: LeaderLease) -> None:  # type: ignore[no-untyped-def]
    """The lease passes to ``b`` on the database while ``a`` still believes it leads (its local
    deadline has not come: the window in which its scheduler may be mid-round)."""
    with db.write() as s:
        s.execute(text("UPDATE controller_lease SET expires_at = 0 WHERE holder = :a"), {"a": a.holder})
    assert b.round() and b.is_leader
    assert a.is_leader  # locally: nothing told it yet


def test_only_the_lease_holder_moves_a_lane_to_interrupted(db) -> None:
    mgr, dp, lane_id = _held_lane(db)
    a, b = LeaderLease(db, "ctl-a"), LeaderLease(db, "ctl-b")
    assert a.round() and a.is_leader
    _depose(db, a, b)
    assert sync_interruptions(db, dp, lambda: T0, fence=a.holds) == {"interrupted": 0, "resumed": 0}
    assert _state(db, lane_id)[0] == "active"
    assert sync_interruptions(db, dp, lambda: T0, fence=b.holds) == {"interrupted": 1, "resumed": 0}
    assert _state(db, lane_id)[0] == "interrupted"


def test_a_deposed_masters_scheduler_writes_no_lane_state(db) -> None:
    mgr, dp, lane_id = _held_lane(db)
    a, b = LeaderLease(db, "ctl-a"), LeaderLease(db, "ctl-b")
    assert a.round() and a.is_leader
    _depose(db, a, b)
    scheduler = Scheduler(mgr, interval_s=0.02, fence=a.holds)  # as ControllerNode builds it
    scheduler.start()
    try:
        time.sleep(0.3)  # a dozen rounds
    finally:
        scheduler.stop()
    assert _state(db, lane_id)[0] == "active"
