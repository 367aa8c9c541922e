"""A port range through a switch without masked port matches (issue 31): carried as exact ports
there, counted against that switch's budget, and refused before anything is written when the
expansion would not fit the switch or the lane's match budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import func, select

from tests.support.clock import T0
from tests.support.paths import CAMPUS_YAML
from tests.support.store import lane_input, principals
from viplanes.controller.compile.budget import CompiledCosts, flow_costs_for
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.errors import Conflict
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import Lane
from viplanes.topologies.loader import load_topology, parse_topology
from viplanes.topologies.model import Topology


def s2_maskless(**keys: Any) -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == "s2":
            sw.update({"profile": "multi_table", "features": {"masked_ports": False}, **keys})
    return parse_topology(data, "maskless.yaml")


def s2_base() -> int:
    base = CompiledCosts(load_topology(CAMPUS_YAML)).base()
    return sum(n for (sw, _), n in base.items() if sw == "s2")


def lanes_written(db) -> int:
    with db.read() as s:
        return s.scalar(select(func.count()).select_from(Lane))


def test_a_port_range_through_a_switch_without_masks_is_carried_as_exact_ports(db):
    """Refused outright before: now carried, 11 exact entries per direction on s2."""
    topo = s2_maskless()
    callers = principals(db, ("alice", "researcher"), max_lanes=5)
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, topo, clock=lambda: T0)
    lane, _ = mgr.request(callers["alice"], lane_input(port=None, dst_ports="9000-9010"))
    assert lane.state == "active"
    assert list(dp.active) == [lane.id]


def test_an_expansion_past_the_match_budget_is_refused_naming_the_switch(db):
    """The attack: a wide range through a maskless switch would be thousands of exact entries
    (1-65535: 131,070 on that switch). Refused before the row is written."""
    topo = s2_maskless()
    callers = principals(db, ("alice", "researcher"), max_lanes=5, ports=("1-65535",))
    mgr = LaneManager(db, MemoryDataplane(), topo, clock=lambda: T0)
    with pytest.raises(Conflict) as exc:
        mgr.request(callers["alice"], lane_input(port=None, dst_ports="1-65535"))
    assert exc.value.code == "switch_lacks_feature"
    assert exc.value.details == {"switch": "s2", "feature": "masked_ports", "match_count": 65535, "limit": 64}
    assert lanes_written(db) == 0
    assert mgr.request(callers["alice"], lane_input(port=None, dst_ports="9000-9063"))[0].state == "active"


def test_a_range_that_fits_as_masks_but_not_as_exact_ports_is_refused_switch_full(db):
    """s2 has room for 20 lane entries: 9000-9063 is 2 masked entries elsewhere but 64 x 2 exact
    ones on s2; counted from the expansion, refused switch_full with nothing written."""
    topo = s2_maskless(max_flows=s2_base() + 20)
    callers = principals(db, ("alice", "researcher"), max_lanes=5)
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, topo, clock=lambda: T0, flow_costs=flow_costs_for(topo))
    with pytest.raises(Conflict) as exc:
        mgr.request(callers["alice"], lane_input(port=None, dst_ports="9000-9063"))
    assert exc.value.code == "switch_full"
    assert exc.value.details == {"switch": "s2", "table": None, "needed": 129, "left": 20}
    assert lanes_written(db) == 0 and dp.active == {}
    lane, _ = mgr.request(callers["alice"], lane_input(port=None, dst_ports="9000-9008"))  # 18 + 1 shared
    assert lane.state == "active"
