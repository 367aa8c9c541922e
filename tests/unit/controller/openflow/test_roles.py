"""OpenFlow roles (``controller/openflow/roles.py``) against a fake switch that keeps roles as OVS does:
the highest generation wins, an older one is refused (OFPRRFC_STALE), a SLAVE's flow-mods are
refused (OFPBRC_IS_SLAVE). The real OVS run is ``tests/integration/test_scaleout.py``."""

from __future__ import annotations

import struct
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.peer import Peer
from tests.support.procs import free_port
from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.openflow.roles import RoleController, deposes, role_request
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.dataplane.base import is_transient

DPID = 1


class RoleSwitch:
    """One switch, several controller connections (each a RoleController)."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.roles: dict[int, int] = {}  # id(controller) -> role
        self.flow_mods: list[tuple[str, Any]] = []

    def connect(self, name: str, ctl: RoleController) -> None:
        self.roles[id(ctl)] = ofp.OFPCR_ROLE_EQUAL

        def send(dpid: int, msgs: list[Any]) -> bool:
            for msg in msgs:
                self._handle(name, ctl, dpid, msg)
            return True

        ctl.runtime.send = send
        ctl.runtime.connected.add(DPID)

    def _handle(self, name: str, ctl: RoleController, dpid: int, msg: Any) -> None:
        if isinstance(msg, parser.OFPRoleRequest):
            if self.generation is not None and msg.generation_id < self.generation:
                ctl.on_error(dpid, msg.xid, ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE)
                return
            self.generation = msg.generation_id
            if msg.role == ofp.OFPCR_ROLE_MASTER:  # the switch demotes the old master itself
                self.roles = {
                    k: ofp.OFPCR_ROLE_SLAVE if r == ofp.OFPCR_ROLE_MASTER else r for k, r in self.roles.items()
                }
            self.roles[id(ctl)] = msg.role
        elif isinstance(msg, parser.OFPFlowMod):
            if self.roles[id(ctl)] == ofp.OFPCR_ROLE_SLAVE:
                ctl.on_error(dpid, msg.xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE)
            else:
                self.flow_mods.append((name, msg))
        elif isinstance(msg, parser.OFPBarrierRequest):
            ctl.on_barrier_reply(dpid, msg.xid)


def controller() -> RoleController:
    ctl = RoleController(LaneRuntime(None))
    ctl.runtime.spawn = lambda fn: None  # no reconcile here: roles only
    return ctl


def a_flow_mod() -> Any:
    return parser.OFPFlowMod(None, cookie=0x56, priority=100, match=parser.OFPMatch(in_port=1), instructions=[])


def test_role_request_carries_the_epoch() -> None:
    msg = role_request(True, 7)
    assert (msg.role, msg.generation_id) == (ofp.OFPCR_ROLE_MASTER, 7)
    assert role_request(False, 7).role == ofp.OFPCR_ROLE_SLAVE
    assert deposes(ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE)
    assert deposes(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE)
    assert not deposes(ofp.OFPET_FLOW_MOD_FAILED, 0)


def test_a_deposed_master_cannot_change_the_switch() -> None:
    switch, a, b = RoleSwitch(), controller(), controller()
    deposed: list[int] = []
    a.on_deposed = deposed.append
    switch.connect("a", a)
    switch.connect("b", b)
    b.set_role(False, 0)
    assert "not master" in (b.runtime._apply({DPID: [a_flow_mod()]}, 1.0) or "")  # refused here, not sent
    a.set_role(True, 1)
    assert a.is_master and a.runtime._apply({DPID: [a_flow_mod()]}, 1.0) is None
    b.set_role(True, 2)  # failover: b took the lease with a higher epoch
    assert b.is_master and a.is_master  # a has not heard yet (paused, partitioned)
    failure = a.runtime._apply({DPID: [a_flow_mod()]}, 1.0)  # ...and tries to write
    assert failure is not None and "refused" in failure and is_transient(failure)  # lane stays installing
    assert not a.is_master and deposed == [1]
    a.set_role(True, 1)  # and tries to take the switch back with its old epoch
    assert not a.is_master
    assert [name for name, _ in switch.flow_mods] == ["a"]  # only what a wrote while master
    assert b.runtime._apply({DPID: [a_flow_mod()]}, 1.0) is None


def test_standby_skips_drift_and_reconcile() -> None:
    ctl = controller()
    calls: list[str] = []
    ctl.runtime.connected.add(DPID)
    ctl.runtime.send = lambda dpid, msgs: calls.append("sent") is None and False
    assert ctl.check_drift() == []
    ctl.reconcile_all()
    assert calls == []


def test_a_nodes_listener_greets_each_switch_with_its_role_and_a_standby_writes_nothing(topo) -> None:
    """The wiring of a cluster node (``viplanes controller cluster``): the embedded controller's
    os-ken app hands a connecting switch to the node's ``RoleController``, which sends its role
    first; a standby then leaves the switch alone (no base flows, not reconciled)."""
    runtime = LaneRuntime(topo)
    roles = RoleController(runtime)
    ctl = EmbeddedController(runtime, port=free_port(), events=roles, refresh_period_s=3600, drift_period_s=0.2)
    ctl.attach_source(lambda: [])
    ctl.start()
    s2 = None
    try:
        s2 = Peer(ctl.port, dpid=2)
        s2.handshake()
        role = s2.serve_until(ofp.OFPT_ROLE_REQUEST)
        assert role is not None, "no role request after the handshake"
        assert struct.unpack_from("!I4xQ", role, 8) == (ofp.OFPCR_ROLE_SLAVE, 0)
        assert s2.serve_until(ofp.OFPT_FLOW_MOD, 1.5) is None  # a standby writes nothing, drift neither
        assert 2 in runtime.connected and 2 not in runtime.reconciled
        assert ctl.switch_view().openflow_role() == "slave"  # the console's column, from the roles
    finally:
        ctl.stop()
        if s2 is not None:
            s2.close()
