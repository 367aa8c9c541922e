"""Synthetic campuses of any size and a count of the product's Python calls: the cost-per-switch
and cost-per-lane tests (work must not grow with switches or lanes a request does not touch)."""

from __future__ import annotations

import sys
from typing import Any

from bench.harness.synth_campus import campus_data, host_ip
from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import parse_topology
from viplanes.topologies.model import Topology


def synth(access: int) -> Topology:
    return parse_topology(campus_data(access, hosts_per_access=1))


def lane(lane_id: int, access_index: int, now: float) -> LaneSpec:
    return LaneSpec(
        lane_id=lane_id,
        src_ip=host_ip(access_index, 0),
        dst_ip="203.0.113.10",
        protocol="tcp",
        dst_port=5000 + lane_id,
        src_port=None,
        nat_ip=f"198.51.100.{200 + access_index % 20}",
        expires_at=now + 3600,
    )


class CountingSource:
    """The store's ``desired_lanes`` as a list, counting how often it is read."""

    def __init__(self, lanes: list[LaneSpec]) -> None:
        self.lanes, self.reads = lanes, 0

    def __call__(self) -> list[LaneSpec]:
        self.reads += 1
        return list(self.lanes)


def restarted(topo: Topology, lanes: list[LaneSpec]) -> tuple[LaneRuntime, FakeSwitches, CountingSource]:
    """A runtime coming up against switches that already hold every lane's flows."""
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    first = switches.attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()))
    first.attach_source(lambda: lanes)
    for dpid in sorted(first.connected):
        first.reconcile_switch(dpid)
    source = CountingSource(lanes)
    runtime = LaneRuntime(topo, clock=clock, spawn=lambda fn: fn())
    runtime.attach_source(source)
    switches.attach(runtime, connect=False)
    switches.sent.clear()
    return runtime, switches, source


TEST_DOUBLES = ("/tests/", "flowsim.py", "netsim.py", "ctsim.py")  # the fake switches' work


def calls_during(work: Any) -> int:
    """Python function calls the product makes while ``work()`` runs (a count, not a time: no
    noise); calls made by the fake switches' flow tables are not counted."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event not in ("call", "c_call"):
            return
        callers = (frame, frame.f_back) if frame.f_back is not None else (frame,)
        if not any(part in f.f_code.co_filename for f in callers for part in TEST_DOUBLES):
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def reconciled_runtime(topo: Topology) -> tuple[LaneRuntime, FakeSwitches, FakeClock]:
    """A runtime whose source is its own carried lanes, every fake switch reconciled (empty)."""
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    runtime = switches.attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()))
    runtime.attach_source(lambda: list(runtime.lanes.values()))
    for dpid in sorted(switches.net.tables):
        runtime.reconcile_switch(dpid)
    return runtime, switches, clock
