"""A new master reconciles against the lanes in the database now, not against its own last read.

A standby reads the desired lanes at its start (``warm_up``) and each reconcile may reuse a read for
``READ_REUSE_S`` while its own generation is unchanged; but the lanes the old master activated in
another process never move a standby's generation. CI found it on a fast machine: the master killed
1.6 s after the standby's start, three lanes activated between, and the new master reconciled
against its start-up read (no lane): it deleted their flows (tests/integration/test_scaleout.py).
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime, lane_flows, spec
from viplanes.controller.compile.lane import compile_lane
from viplanes.controller.openflow.roles import RoleController
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology


def test_the_lanes_the_old_master_left_are_kept(topo: Topology) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    send = switches.send

    def without_roles(dpid: int, msgs: list[Any]) -> bool:  # the fake tables hold flows, not roles
        return send(dpid, [m for m in msgs if not isinstance(m, parser.OFPRoleRequest)])

    rt.send = without_roles
    in_database: list[LaneSpec] = []
    rt.attach_source(lambda: list(in_database))
    ctl = RoleController(rt)
    rt.warm_up()  # the standby's read at its start: no lane yet
    lane = spec(1)
    switches.net.install(compile_lane(lane, topo, clock()))  # the old master, another process
    in_database.append(lane)
    s1 = topo.switch("s1").dpid
    assert lane_flows(switches, s1, 1)
    clock.advance(0.5)  # well inside READ_REUSE_S
    ctl.set_role(True, 2)  # the old master died; this one took the lease
    assert ctl.is_master
    assert lane_flows(switches, s1, 1), "the new master deleted a lane the database holds"
