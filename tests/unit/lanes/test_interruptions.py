"""A lane the controller holds for want of a usable path reads ``interrupted`` with the links'
names, in the lane record and the audit log; ``active`` again when carried; past its end it
simply ends (issue 42)."""

from __future__ import annotations

from sqlalchemy import select

from tests.support.clock import T0
from tests.support.store import campus_topology, lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.interruptions import sync_interruptions
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import AuditEvent, Lane

WHY = "no usable path to the edge: s2:3-s3:3 down (port s3:3 down); s2:4-s3:5 down (port s3:5 down)"


class HoldingDataplane(MemoryDataplane):
    """The memory plane, plus the lanes a test says the controller holds."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[int, str] = {}

    def interrupted(self) -> dict[int, str]:
        return dict(self.held)


def _state(db, lane_id: int) -> tuple[str, str, float | None]:
    with db.read() as s:
        lane = s.get(Lane, lane_id)
        return lane.state, lane.reason, lane.activated_at


def test_held_lanes_read_interrupted_then_active_then_end(db) -> None:
    callers = principals(db, ("alice", "researcher"))
    clock = [T0]
    dp = HoldingDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    lane, _ = mgr.request(callers["alice"], lane_input())
    started = _state(db, lane.id)[2]
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 0, "resumed": 0}

    dp.held = {lane.id: WHY}
    clock[0] += 1
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 1, "resumed": 0}
    assert _state(db, lane.id)[:2] == ("interrupted", WHY)
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 0, "resumed": 0}  # once
    assert lane.id in dp.active  # still carried: its flows (the hold) stay

    dp.held = {}
    clock[0] += 1
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 0, "resumed": 1}
    state, reason, activated = _state(db, lane.id)
    assert (state, activated) == ("active", started) and "path is back" in reason

    dp.held = {lane.id: WHY}
    sync_interruptions(db, dp, lambda: clock[0])
    clock[0] = T0 + 601  # lane_input's duration has passed while interrupted
    assert mgr.tick()["expired"] == 1
    assert _state(db, lane.id)[0] == "expired" and lane.id not in dp.active
    with db.read() as s:
        actions = [e.action for e in s.scalars(select(AuditEvent).where(AuditEvent.target == f"lane:{lane.id}"))]
    assert actions.count("lane.interrupt") == 2 and actions.count("lane.resume") == 1


class HeldFromTheStart(HoldingDataplane):
    """The controller carries the lane but no usable path exists: it answers ok and held."""

    def activate(self, lane, timeout_s: float = 5.0):
        from viplanes.domain.values import ActivationResult

        super().activate(lane, timeout_s)
        self.held[lane.lane_id] = WHY
        return ActivationResult(True, WHY, 0.001, held=True)


def test_a_lane_requested_while_no_path_exists_answers_interrupted_then_resumes_by_itself(db) -> None:
    callers = principals(db, ("alice", "researcher"))
    clock = [T0]
    dp = HeldFromTheStart()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    lane, created = mgr.request(callers["alice"], lane_input())
    assert created and (lane.state, lane.reason) == ("interrupted", WHY)  # the answer: held, not an error
    assert _state(db, lane.id)[:2] == ("interrupted", WHY)
    with db.read() as s:
        events = [
            (e.action, e.decision, e.reason)
            for e in s.scalars(select(AuditEvent).where(AuditEvent.target == f"lane:{lane.id}"))
        ]
    assert ("lane.activate", "held", WHY) in events
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 0, "resumed": 0}  # no flapping

    dp.held = {}  # a path came back: the controller carries it
    clock[0] += 5
    assert sync_interruptions(db, dp, lambda: clock[0]) == {"interrupted": 0, "resumed": 1}
    state, reason, activated = _state(db, lane.id)
    assert (state, activated) == ("active", T0 + 5) and "path is back" in reason  # it started now
