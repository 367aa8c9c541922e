"""Budget correction after a switch says its table is full (issue 31): the switch refuses a flow
with OFPFMFC_TABLE_FULL while the declared ``max_flows`` still had room; the controller counts
what it held, lowers that switch's budget to it, and the next request is refused 409
``switch_full`` before anything is written or sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser
from sqlalchemy import func, select

from tests.support.clock import T0, FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.paths import CAMPUS_YAML
from tests.support.store import lane_input, principals
from viplanes.controller.compile.budget import CompiledCosts, flow_costs_for
from viplanes.controller.compile.cookies import APP_COOKIE, APP_COOKIE_MASK
from viplanes.controller.runtime.switchfacts import FactBook
from viplanes.errors import Conflict
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import Lane
from viplanes.topologies.loader import load_topology, parse_topology
from viplanes.topologies.model import Topology


class SmallTable(FakeSwitches):
    """Fake switches where ``dpid`` holds at most ``limit`` flows: an ADD of a new flow past it is
    refused OFPFMFC_TABLE_FULL, as OVS does with ``Flow_Table flow_limit`` + ``overflow_policy=refuse``."""

    def __init__(self, topo: Topology, clock: FakeClock, dpid: int, limit: int) -> None:
        super().__init__(topo, clock)
        self.limited, self.limit = dpid, limit

    def send(self, dpid: int, ofmsgs: list[Any]) -> bool:
        for msg in ofmsgs:
            full = (
                dpid == self.limited
                and isinstance(msg, parser.OFPFlowMod)
                and msg.command == ofp.OFPFC_ADD
                and len(self.net.tables[dpid].flows) >= self.limit
            )
            if full:
                assert self.runtime is not None
                self.sent.append((dpid, msg))
                self.runtime.on_error(dpid, msg.xid, ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL)
            elif not super().send(dpid, [msg]):
                return False
        return True


def s2_base() -> int:
    return sum(n for (sw, _), n in CompiledCosts(load_topology(CAMPUS_YAML)).base().items() if sw == "s2")


def budgeted(max_flows: int) -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == "s2":
            sw["max_flows"] = max_flows
    return parse_topology(data, "budget.yaml")


def world(db, declared: int, real: int):
    topo, clock = budgeted(declared), FakeClock(T0)
    switches = SmallTable(topo, clock, topo.switch("s2").dpid, real)
    runtime = inline_runtime(topo, clock, switches, base_flows=True)
    mgr = LaneManager(db, runtime, topo, clock=clock, flow_costs=flow_costs_for(topo))
    runtime.attach_source(mgr.desired_lanes)
    return mgr, runtime, switches, principals(db, ("alice", "researcher"), max_lanes=20)


def test_a_table_full_below_the_budget_lowers_it_and_the_next_request_is_refused_up_front(db):
    """The switch really holds base + 4; the topology promised base + 40. A desktop lane takes 3
    entries on s2 (2 own + 1 shared), the next one 2: the second is refused by the switch, the
    third by the budget, without a message to any switch."""
    base = s2_base()
    mgr, runtime, switches, callers = world(db, declared=base + 40, real=base + 4)
    first, _ = mgr.request(callers["alice"], lane_input(port=9000))
    assert first.state == "active"
    second, _ = mgr.request(callers["alice"], lane_input(port=9001))
    assert second.state == "failed" and "OFPFMFC_TABLE_FULL" in second.reason
    facts = runtime.switch_facts()["s2"]
    assert facts.full_at == base + 4  # what s2 held when it refused: base + 3 + the 1 it took
    sent = len(switches.sent)
    with pytest.raises(Conflict) as exc:
        mgr.request(callers["alice"], lane_input(port=9002))
    assert exc.value.code == "switch_full"
    assert exc.value.details == {"switch": "s2", "table": None, "needed": 2, "left": 1}
    assert len(switches.sent) == sent  # nothing sent to any switch
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Lane).where(Lane.dst_port == 9002)) == 0
    assert ("s2", base + 4, base + 3) in mgr.flow_budgets()  # /metrics and the console show it


def test_the_learned_max_only_ever_goes_down():
    book = FactBook()
    assert book.full("s2", 50) and book.snapshot()["s2"].full_at == 50
    assert not book.full("s2", 60)  # someone else freed entries: not trusted to last
    assert book.full("s2", 45) and book.snapshot()["s2"].full_at == 45


def test_the_count_is_of_our_flows_only(db):
    base = s2_base()
    mgr, runtime, switches, callers = world(db, declared=base + 40, real=base + 2)
    lane, _ = mgr.request(callers["alice"], lane_input(port=9000))
    assert lane.state == "failed"
    ours = switches.net.tables[runtime.topology.switch("s2").dpid].stats(APP_COOKIE, APP_COOKIE_MASK, T0)
    assert runtime.switch_facts()["s2"].full_at == base + 2 and len(ours) == base  # rolled back since
