"""A switch becoming ready activates the lanes that waited for it at once, not at the scheduler's
next recovery round (2 s): the reconcile that makes it ready wakes the scheduler's thread, which
stays the one writer of lane state. The controller runtime over fake switches, a real database."""

from __future__ import annotations

import time

from sqlalchemy import update

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.store import campus_topology, lane_input, principals
from viplanes.controller.compile import lane as compiler
from viplanes.lanes.manager import LaneManager
from viplanes.lanes.scheduler import RECOVER_EVERY_S, Scheduler
from viplanes.store.models import Lane


def _state(db, lane_id: int) -> str:
    with db.read() as s:
        lane = s.get(Lane, lane_id)
        return lane.state


def test_a_switch_becoming_ready_starts_the_waiting_lane_within_a_fraction_of_the_round(db) -> None:
    callers = principals(db, ("alice", "researcher"))
    topo = campus_topology()
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    mgr = LaneManager(db, rt, topo, clock=clock)
    rt.attach_source(mgr.desired_lanes)
    lane, _ = mgr.request(callers["alice"], lane_input())
    assert lane.state == "active"
    first = compiler.path_dpids(rt.lanes[lane.id], topo)[0]
    rt.switch_down(first)  # its switch went away: the lane waits for it, installing
    with db.write() as s:
        s.execute(update(Lane).where(Lane.id == lane.id).values(state="installing"))
    sched = Scheduler(mgr, interval_s=0.02)  # recovery every RECOVER_EVERY_S (2 s)
    sched.start()
    try:
        time.sleep(0.3)  # the first recovery round ran and skipped the unready lane
        assert _state(db, lane.id) == "installing"
        t0 = time.monotonic()
        rt.switch_up(first)  # reconciled inline: ready now
        while _state(db, lane.id) == "installing" and time.monotonic() - t0 < 5.0:
            time.sleep(0.01)
        took = time.monotonic() - t0
    finally:
        sched.stop()
    assert _state(db, lane.id) == "active"
    print(f"lane active {took:.3f} s after its switch became ready")
    assert took < RECOVER_EVERY_S / 2, f"active {took:.2f} s after its switch became ready"


def test_a_scheduler_started_after_its_switches_were_ready_runs_its_first_round_at_once(db) -> None:
    """A new master (fail-over, issue 44): its switches were reconciled before the scheduler
    named itself to be woken, so nothing wakes it; its first round must not wait a tick."""
    callers = principals(db, ("alice", "researcher"))
    topo = campus_topology()
    clock = FakeClock()
    rt = inline_runtime(topo, clock, FakeSwitches(topo, clock), base_flows=True)
    mgr = LaneManager(db, rt, topo, clock=clock)
    rt.attach_source(mgr.desired_lanes)
    lane, _ = mgr.request(callers["alice"], lane_input())
    rt.deactivate(lane.id)  # the dead master's lane: committed installing, carried by no one here
    with db.write() as s:
        s.execute(update(Lane).where(Lane.id == lane.id).values(state="installing"))
    sched = Scheduler(mgr, interval_s=2.0)  # a tick far longer than the wait below
    t0 = time.monotonic()
    sched.start()
    try:
        while _state(db, lane.id) == "installing" and time.monotonic() - t0 < 5.0:
            time.sleep(0.01)
        took = time.monotonic() - t0
    finally:
        sched.stop()
    assert _state(db, lane.id) == "active"
    assert took < 0.5, f"the first round ran {took:.2f} s after the start (a tick is 2 s)"
