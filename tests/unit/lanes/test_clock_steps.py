"""A wall-clock step must neither end a lane early nor keep it past its end (issue 28, item 4).

The lane service is built the way ``viplanes serve`` and ``viplanes api`` build it
(``create_app`` without a clock), with ``time.time`` and ``time.monotonic`` replaced by one fake
machine whose wall clock a test steps by an hour either way. Before the steady clock the manager
read ``time.time``: +1 h expired a 10-minute lane at the next tick, -1 h kept it an hour longer.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from tests.support.apps import make_app
from tests.support.clock import T0, SteppedHost
from tests.support.store import campus_topology, lane_input, principals
from viplanes.authz.tokens import Caller
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.clock import SteadyClock

TICK_S = 0.5  # the scheduler's default period: "no later than one tick"
HOUR = 3600.0


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> SteppedHost:
    machine = SteppedHost(T0)
    monkeypatch.setattr(time, "time", machine.wall)
    monkeypatch.setattr(time, "monotonic", machine.monotonic)
    return machine


@pytest.fixture
def served(host: SteppedHost, sqlite_url: str) -> tuple[Any, MemoryDataplane, Any]:
    """(manager, data plane, alice) as serve wires them; built after the clocks are patched."""
    dp = MemoryDataplane()
    ctx = make_app({"db_url": sqlite_url}, dataplane=dp, topology=campus_topology()).extensions["viplanes"]
    alice = principals(ctx.db, ("alice", "researcher"))["alice"]
    yield ctx.manager, dp, alice
    ctx.db.dispose()


def _state(manager: Any, lane_id: int) -> str:
    return str(manager.get(Caller(0, "root", "operator"), lane_id).state)


def test_a_forward_step_ends_no_lane_early(served, host) -> None:
    manager, dp, alice = served
    lane, _ = manager.request(alice, lane_input(duration_s=600))
    assert lane.state == "active"
    host.elapse(60)
    host.step(+HOUR)  # the wall clock jumps an hour ahead
    assert manager.tick() == {"started": 0, "expired": 0}
    assert _state(manager, lane.id) == "active" and lane.id in dp.active
    assert [spec.lane_id for spec in manager.desired_lanes()] == [lane.id]
    host.elapse(600 - 60 - 1)  # a second before its real end
    manager.tick()
    assert _state(manager, lane.id) == "active" and lane.id in dp.active
    host.elapse(1 + TICK_S)  # its real end, one tick later
    assert manager.tick()["expired"] == 1
    assert _state(manager, lane.id) == "expired" and lane.id not in dp.active


def test_a_backward_step_keeps_no_lane_past_its_end(served, host) -> None:
    manager, dp, alice = served
    lane, _ = manager.request(alice, lane_input(duration_s=600))
    host.elapse(60)
    host.step(-HOUR)  # the wall clock jumps an hour back
    host.elapse(600 - 60 - 1)
    manager.tick()
    assert _state(manager, lane.id) == "active"
    host.elapse(1 + TICK_S)
    assert manager.tick()["expired"] == 1  # at its real end, not an hour later
    assert _state(manager, lane.id) == "expired" and lane.id not in dp.active
    assert manager.desired_lanes() == []  # the controller's reconcile source drops it too


def test_a_booking_starts_on_time_across_a_step(served, host) -> None:
    manager, dp, alice = served
    booked, _ = manager.request(alice, lane_input(duration_s=300, start_at=T0 + 120))
    assert booked.state == "scheduled"
    host.step(+HOUR)  # would have started it now, and expired it at once (it "ended" 55 min ago)
    assert manager.tick() == {"started": 0, "expired": 0}
    assert _state(manager, booked.id) == "scheduled"
    host.elapse(120)
    assert manager.tick()["started"] == 1 and booked.id in dp.active


def test_the_steady_clock_follows_real_time_and_reports_each_step(caplog) -> None:
    host = SteppedHost(T0)
    clock = SteadyClock(wall=host.wall, monotonic=host.monotonic)
    assert clock() == T0
    host.elapse(10)
    assert clock() == T0 + 10 and clock.wall_offset() == 0
    with caplog.at_level(logging.WARNING, logger="viplanes.domain.clock"):
        host.step(+HOUR)
        host.elapse(2)
        assert clock() == T0 + 12  # the step does not move it
        assert clock() == T0 + 12
        host.step(-2 * HOUR)
        host.elapse(2)
        assert clock() == T0 + 14 and clock.wall_offset() == -HOUR
    steps = [r.getMessage() for r in caplog.records]
    assert len(steps) == 2 and "+3600.0 s" in steps[0] and "-7200.0 s" in steps[1], steps
