"""Flow-table budgets: the arithmetic, the compiler's counts it relies on, and the lane manager
refusing a lane that would not fit (SQLite here, PostgreSQL under -m postgres) before anything
is written or sent."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from os_ken.ofproto import ofproto_v1_3_parser as parser
from sqlalchemy import func, select

from tests.support.clock import T0
from tests.support.concurrency import run_together
from tests.support.paths import CAMPUS_YAML
from tests.support.store import lane_input, principals
from viplanes.controller.compile.base import compile_base
from viplanes.controller.compile.budget import CompiledCosts, flow_costs_for
from viplanes.controller.compile.lane import compile_lane
from viplanes.controller.compile.shared import lane_addresses
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.flowcost import FlowCost
from viplanes.domain.values import LaneSpec
from viplanes.errors import Conflict
from viplanes.lanes.budgets import live_specs, needed_by, shortfall, usage
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import Lane
from viplanes.topologies.loader import load_topology, parse_topology
from viplanes.topologies.model import Topology

DESKTOP_LANE = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 9000, None, "198.51.100.193", T0 + 600)


def with_limit(switch: str, max_flows: Any) -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == switch:
            sw["max_flows"] = max_flows
    return parse_topology(data, "budget.yaml")


def flowmods(by_dpid: dict[int, list[Any]]) -> int:
    return sum(isinstance(m, parser.OFPFlowMod) for msgs in by_dpid.values() for m in msgs)


# ---- arithmetic -------------------------------------------------------------------------------


def test_shared_entries_count_once_per_address():
    a = FlowCost(own={("s1", 0): 2}, shared={"10.1.0.10": {("s1", 0): 1}})
    b = FlowCost(own={("s1", 0): 2}, shared={"10.1.0.10": {("s1", 0): 1}})
    assert usage({("s1", 0): 30}, [a, b]) == Counter({("s1", 0): 35})
    assert needed_by(b, [a]) == Counter({("s1", 0): 2})  # the address's entry is already there
    assert needed_by(b, []) == Counter({("s1", 0): 3})


def test_shortfall_totals_and_tables():
    topo = with_limit("s1", {"total": 40, "tables": {0: 35}})
    base = {("s1", 0): 30}
    lane = FlowCost(own={("s1", 0): 2}, shared={"x": {("s1", 0): 1}})
    assert shortfall(topo, base, [], lane) is None  # 33 of 35 in table 0
    short = shortfall(topo, base, [lane], FlowCost(own={("s1", 0): 3}))
    assert short is not None and (short.switch, short.table, short.needed, short.left) == ("s1", 0, 3, 2)
    short = shortfall(topo, base, [], FlowCost(own={("s1", 0): 2, ("s1", 1): 9}))
    assert short is not None and (short.table, short.needed, short.left) == (None, 11, 10)


# ---- the compiler's counts --------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        DESKTOP_LANE,
        LaneSpec(8, "10.1.0.20", None, "udp", None, 5000, None, T0 + 600, 50.0, ("203.0.113.0/28",), ((9000, 9100),)),
        LaneSpec(9, "198.51.100.30", "203.0.113.10", "tcp", 443, None, None, T0 + 600),
    ],
)
def test_costs_are_what_the_compiler_emits(spec):
    topo = load_topology(CAMPUS_YAML)
    costs = CompiledCosts(topo)
    assert sum(costs.base().values()) == flowmods(compile_base(topo))
    cost = costs.lane(spec)
    nat = spec if spec.nat_ip or not topo.host_by_ip(spec.src_ip).needs_nat else None
    if nat is not None:
        assert sum(cost.own.values()) == flowmods(compile_lane(spec, topo, T0))
        shared = sum(flowmods(d) for d in lane_addresses(spec, topo).values())
        assert sum(n for s in cost.shared.values() for n in s.values()) == shared
    assert sum(cost.own.values()) > 0


def test_no_costs_without_a_limit():
    assert flow_costs_for(load_topology(CAMPUS_YAML)) is None
    assert flow_costs_for(with_limit("s1", 100)) is not None


# ---- the lane manager ---------------------------------------------------------------------------


def _manager(db, topo: Topology, dp: MemoryDataplane, clock: list[float]) -> LaneManager:
    return LaneManager(db, dp, topo, clock=lambda: clock[0], flow_costs=CompiledCosts(topo))


def test_requests_fill_a_switch_and_the_next_is_refused_before_anything_is_written(db):
    """The attack: one researcher asks lane after lane until the access switch's table is full,
    so every later lane (anyone's) half-installs or fails at the switch. Now: refused up front."""
    base = CompiledCosts(load_topology(CAMPUS_YAML)).base()
    s1_base = sum(n for (sw, _), n in base.items() if sw == "s1")
    topo = with_limit("s1", s1_base + 12)  # a dozen entries: 3 for the first lane, 2 per lane after
    callers = principals(db, ("alice", "researcher"), max_lanes=20)
    dp, clock = MemoryDataplane(), [T0]
    mgr = _manager(db, topo, dp, clock)
    made = [mgr.request(callers["alice"], lane_input(port=9000 + i))[0] for i in range(5)]
    assert all(lane.state == "active" for lane in made)
    with pytest.raises(Conflict) as exc:
        mgr.request(callers["alice"], lane_input(port=9005))
    assert exc.value.code == "switch_full"
    assert exc.value.details == {"switch": "s1", "table": None, "needed": 2, "left": 1}
    assert "s1's flow table is full" in exc.value.message
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Lane)) == 5  # no row for the refused one
    assert set(dp.active) == {lane.id for lane in made}
    mgr.end(callers["alice"], made[0].id, "released")  # a lane ends: its entries come back
    assert mgr.request(callers["alice"], lane_input(port=9005))[0].state == "active"


def test_bookings_hold_their_entries_for_their_window(db):
    base = CompiledCosts(load_topology(CAMPUS_YAML)).base()
    s3_base = sum(n for (sw, _), n in base.items() if sw == "s3")
    topo = with_limit("s3", s3_base + 9)  # exactly one desktop lane (6 own + 3 shared)
    callers = principals(db, ("alice", "researcher"), max_lanes=20)
    clock = [T0]
    mgr = _manager(db, topo, MemoryDataplane(), clock)
    booked, _ = mgr.request(callers["alice"], lane_input(port=9000, start_at=T0 + 1000))
    assert booked.state == "scheduled"
    with pytest.raises(Conflict) as exc:  # overlaps the booking's window
        mgr.request(callers["alice"], lane_input(port=9001, start_at=T0 + 900))
    assert exc.value.code == "switch_full" and exc.value.details["switch"] == "s3"
    now, _ = mgr.request(callers["alice"], lane_input(port=9002))  # ends (T0+600) before it starts
    assert now.state == "active"


class SlowCosts(CompiledCosts):
    """Counting takes a while (a large campus): the window between check and write widens."""

    def lane(self, spec: LaneSpec) -> FlowCost:
        time.sleep(0.01)
        return super().lane(spec)


def test_parallel_requests_never_overrun_the_budget(db):
    """The attack: two researchers (two grants, two sources: no shared lock but the budget's)
    fire requests at once, each checking the budget before any other is written."""
    costs = CompiledCosts(load_topology(CAMPUS_YAML))
    s1_base = sum(n for (sw, _), n in costs.base().items() if sw == "s1")
    topo = with_limit("s1", s1_base + 12)
    callers = principals(db, ("alice", "researcher"), ("bob", "researcher"), max_lanes=40)
    mgr = LaneManager(db, MemoryDataplane(), topo, clock=lambda: T0, flow_costs=SlowCosts(topo))
    codes: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        who, src = ("alice", "10.1.0.10") if i % 2 else ("bob", "10.1.0.20")
        try:
            # bookings: no lane-pool address yet, so no pool lock serialises them either
            mgr.request(callers[who], lane_input(src=src, port=9000 + i, start_at=T0 + 100))
            code = "ok"
        except Conflict as exc:
            code = exc.code
        with lock:
            codes.append(code)

    run_together(one, 16)
    assert set(codes) == {"ok", "switch_full"}, codes
    with db.read() as s:
        live = live_specs(s.connection(), T0, T0 + 10_000)
    used = usage(costs.base(), [costs.lane(spec) for spec in live])
    assert sum(n for (sw, _), n in used.items() if sw == "s1") <= s1_base + 12


# ---- features the profile lacks ---------------------------------------------------------------


def with_profile(switch: str, **keys: Any) -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == switch:
            sw.update(keys)
    return parse_topology(data, "profile.yaml")


def test_a_rate_cap_on_a_switch_without_meters_is_refused_before_anything_is_written(db):
    """The attack (or the accident): a rate-capped lane on a meterless switch would half-install
    (flows without their meter) or run uncapped. Refused, naming the switch."""
    topo = with_profile("s1", profile="single_table")
    callers = principals(db, ("alice", "researcher"), max_lanes=5)
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, topo, clock=lambda: T0)
    with pytest.raises(Conflict) as exc:
        mgr.request(callers["alice"], lane_input(rate_mbps=50.0))
    assert exc.value.code == "switch_lacks_feature"
    assert exc.value.details == {"switch": "s1", "feature": "meters"} and "s1 (profile single_table)" in str(exc.value)
    assert dp.active == {}
    assert mgr.request(callers["alice"], lane_input())[0].state == "active"  # uncapped: fine


# a port range through a switch without masks: tests/unit/lanes/test_port_expansion_budget.py


def test_extending_into_a_booking_that_fills_the_switch_is_refused(db):
    """The attack: book a lane that fits after mine ends, then extend mine into the booking's
    window: both would be live on a switch that holds only one."""
    base = CompiledCosts(load_topology(CAMPUS_YAML)).base()
    s3_base = sum(n for (sw, _), n in base.items() if sw == "s3")
    topo = with_limit("s3", s3_base + 9)  # exactly one desktop lane
    callers = principals(db, ("alice", "researcher"), max_lanes=20)
    mgr = _manager(db, topo, MemoryDataplane(), [T0])
    mine, _ = mgr.request(callers["alice"], lane_input(port=9000))  # until T0 + 600
    booked, _ = mgr.request(callers["alice"], lane_input(port=9001, start_at=T0 + 700))
    assert booked.state == "scheduled"
    assert mgr.extend(callers["alice"], mine.id, 60).expires_at == T0 + 660  # still clear of it
    with pytest.raises(Conflict) as exc:
        mgr.extend(callers["alice"], mine.id, 300)
    assert exc.value.code == "switch_full" and exc.value.details["switch"] == "s3"
    with db.read() as s:
        assert s.get(Lane, mine.id).expires_at == T0 + 660
