"""The drift check across a wall-clock step (issue 28, item 4): the switches' hard timeouts are
relative, so the controller must judge lane ends on a clock that steps with neither of them.

Before: with the runtime on ``time.time``, a -1 h step made the drift check re-install the flows
of a lane the switches had just timed out, with a fresh hour of hard timeout (the lane outlived
its grant); a +1 h step made it delete the flows of a lane with minutes left. The fake switches
count their timeouts on real elapsed time (``SteppedHost.true``), as OVS does."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.clock import T0, SteppedHost
from tests.support.fake_switches import FakeSwitches, inline_runtime, lane_flows, spec
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.clock import SteadyClock
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

HOUR = 3600.0


def lane_clock(host: SteppedHost) -> Callable[[], float]:
    """The clock ``viplanes serve`` gives its controller and its lane service (one, shared)."""
    return SteadyClock(wall=host.wall, monotonic=host.monotonic)


@pytest.fixture
def host() -> SteppedHost:
    return SteppedHost(T0)


def carried_lane(topo: Topology, host: SteppedHost, expires_in: float) -> tuple[LaneRuntime, FakeSwitches, LaneSpec]:
    clock = lane_clock(host)
    switches = FakeSwitches(topo, host.true)  # the switches count hard timeouts on real time
    rt = inline_runtime(topo, clock, switches, base_flows=True)  # type: ignore[arg-type]
    lane = spec(1, expires_in=expires_in, now=clock())
    # the database's answer on the same clock, as ``LaneManager.desired_lanes`` gives it
    rt.attach_source(lambda: [ln for ln in [lane] if ln.expires_at > clock()])
    assert rt.activate(lane).ok
    return rt, switches, lane


def run_for(rt: LaneRuntime, switches: FakeSwitches, host: SteppedHost, seconds: float, period: float = 2.0) -> None:
    """Drift rounds every ``period`` seconds of real time, the switches expiring flows meanwhile."""
    for _ in range(int(seconds / period)):
        host.elapse(period)
        switches.net.expire(host.true.now)
        rt.check_drift()


def test_a_backward_step_never_brings_back_a_lane_the_switches_timed_out(topo, host) -> None:
    rt, switches, lane = carried_lane(topo, host, expires_in=30)
    run_for(rt, switches, host, 10)
    host.step(-HOUR)
    run_for(rt, switches, host, 40)  # through its end (20 s after the step) and well past it
    for dpid in switches.net.tables:
        assert lane_flows(switches, dpid, lane.lane_id) == [], f"lane flows back on s{dpid}"
    assert rt.drift_reconciles == 0


def test_a_forward_step_takes_no_flow_of_a_running_lane(topo, host) -> None:
    rt, switches, lane = carried_lane(topo, host, expires_in=600)
    held = {dpid: len(lane_flows(switches, dpid, lane.lane_id)) for dpid in switches.net.tables}
    assert sum(held.values()) > 0
    host.step(+HOUR)
    run_for(rt, switches, host, 20)
    assert {dpid: len(lane_flows(switches, dpid, lane.lane_id)) for dpid in switches.net.tables} == held
    assert rt.drift_reconciles == 0
