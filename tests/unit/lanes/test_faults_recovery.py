"""Lanes under faults, above the data plane: readiness gate, transient failures, continuous
recovery. The integration side (real OVS, real serve, kill -9) is tests/integration/test_faults*.py."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.support.clock import T0
from tests.support.store import campus_topology, lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import AuditEvent, Lane


def test_request_while_switches_are_away_is_503_with_retry_after_and_no_row(world):
    world.dataplane.away = ["switch s1 (dpid 1)"]
    r = world.lane()
    assert r.status_code == 503 and r.json["error"] == "switches_not_ready", r.json
    assert r.headers["Retry-After"] == "2" and r.json["details"]["switches"] == ["switch s1 (dpid 1)"]
    assert world.client.get("/api/v1/lanes", headers=world.h("alice")).json == []
    ready = world.client.get("/api/v1/readiness", headers=world.h("root"))
    assert ready.status_code == 503 and ready.headers["Retry-After"] == "2"
    assert ready.json["ready"] is False and ready.json["switches"][0]["connected"] is False
    assert world.client.get("/readyz").status_code == 503
    assert world.client.get("/healthz").status_code == 200  # liveness is not readiness
    world.dataplane.away = []
    assert world.client.get("/api/v1/readiness", headers=world.h("root")).json == {
        "status": "ready",
        "database": "ok",
        "ready": True,
        "switches": [],
    }
    assert world.lane().status_code == 201


def test_scheduled_lane_waits_for_its_switches_then_starts(world):
    r = world.lane(start_at="2027-01-15T08:10:00+00:00")  # T0 + 10 min
    assert r.json["state"] == "scheduled"
    manager = world.app.extensions["viplanes"].manager
    world.dataplane.away = ["switch s1 (dpid 1)"]
    world.clock.advance(601)
    manager.tick()
    lane = world.client.get(f"/api/v1/lanes/{r.json['id']}", headers=world.h("alice")).json
    assert lane["state"] == "scheduled"  # not failed: its switch is only away
    world.dataplane.away = []
    manager.tick()
    lane = world.client.get(f"/api/v1/lanes/{r.json['id']}", headers=world.h("alice")).json
    assert lane["state"] == "active"


def test_scheduled_lane_whose_window_passed_in_an_outage_expires_with_reason(world):
    r = world.lane(start_at="2027-01-15T08:10:00+00:00", duration_s=60)
    world.dataplane.away = ["switch s1 (dpid 1)"]
    world.clock.advance(600 + 61)
    world.app.extensions["viplanes"].manager.tick()
    lane = world.client.get(f"/api/v1/lanes/{r.json['id']}", headers=world.h("alice")).json
    assert lane["state"] == "expired" and lane["reason"] == "ended before it could start"


def test_transient_activation_failure_stays_installing_and_is_recovered(db):
    callers = principals(db, ("alice", "researcher"))
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: T0)
    dp.fail_next = "switch s2 (dpid 2) not connected"
    lane, created = mgr.request(callers["alice"], lane_input())
    assert created and lane.state == "installing"
    assert lane.reason == "waiting for the data plane: switch s2 (dpid 2) not connected"
    assert mgr.recover() == 1
    with db.read() as s:
        assert s.get(Lane, lane.id).state == "active"
        outcomes = s.scalars(select(AuditEvent.decision).where(AuditEvent.action == "lane.activate")).all()
    assert sorted(outcomes) == ["done", "retry"]


def test_permanent_activation_failure_still_fails(db):
    callers = principals(db, ("alice", "researcher"))
    dp = MemoryDataplane()
    dp.fail_next = "switch s3 (dpid 3) refused: OFPET_BAD_MATCH code 3"
    lane, _ = LaneManager(db, dp, campus_topology(), clock=lambda: T0).request(callers["alice"], lane_input())
    assert lane.state == "failed" and "refused" in lane.reason


def test_lane_left_installing_by_a_failed_state_update_is_recovered(db, monkeypatch):
    """The row was committed, the update to active failed (database outage): the next recovery
    round of the same process resolves it; it is not skipped as "being activated"."""
    callers = principals(db, ("alice", "researcher"))
    dp = MemoryDataplane()
    clock = [T0]
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    clock[0] += 1  # the lane is newer than the process: not a start-up leftover
    # the lane hot path's writes (viplanes/store/lanesql/core.py): a transaction, or on PostgreSQL
    # the outcome's one autocommit statement (``statement_connection``)
    real = {name: getattr(db, name) for name in ("write_connection", "statement_connection")}
    calls = {"n": 0}

    def flaky(name: str):
        def connect():
            calls["n"] += 1
            if calls["n"] == 2:  # the state update after activation
                raise RuntimeError("database went away")
            return real[name]()

        return connect

    for name in real:
        monkeypatch.setattr(db, name, flaky(name))
    with pytest.raises(RuntimeError):
        mgr.request(callers["alice"], lane_input())
    for name, fn in real.items():
        monkeypatch.setattr(db, name, fn)
    with db.read() as s:
        (stuck,) = s.scalars(select(Lane)).all()
    assert stuck.state == "installing"
    assert mgr.recover() == 1
    with db.read() as s:
        assert s.get(Lane, stuck.id).state == "active"


def test_recover_skips_lanes_whose_switches_are_away_and_lanes_past_their_window(db):
    callers = principals(db, ("alice", "researcher"))
    dp = MemoryDataplane()
    clock = [T0]
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    lane, _ = mgr.request(callers["alice"], lane_input(duration_s=60))
    with db.write() as s:
        s.get(Lane, lane.id).state = "installing"
    dp.away = ["switch s1 (dpid 1)"]
    assert mgr.recover() == 0
    clock[0] += 61
    dp.away = []
    assert mgr.recover() == 0  # its window is over: tick expires it
    assert mgr.tick()["expired"] == 1
