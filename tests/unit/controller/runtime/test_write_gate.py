"""The write gate (``SwitchState.may_write``): a master whose lease ran out on its own clock
writes nothing on any path, whatever its role bit says (issue 28, item 5). The real run, a
master cut off from PostgreSQL, is tests/integration/test_master_partition_pg.py."""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime, spec
from tests.support.rawof import of_kind


def test_a_closed_gate_stops_every_write_path(topo) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    assert rt.activate(spec(1, now=clock.now)).ok
    lease_valid = [True]
    rt.gate_writes(lambda: lease_valid[0])
    assert rt.is_master
    lease_valid[0] = False  # the lease's deadline passed; nobody told the role bit yet
    before = len(switches.sent)
    dpid = sorted(switches.net.tables)[0]
    switches.net.tables[dpid].flows.clear()  # drift a reconcile would repair
    assert not rt.is_master and rt.state.is_master
    result = rt.activate(spec(2, now=clock.now, dst_port=5202))
    assert not result.ok and "not master" in result.reason
    assert rt.check_drift() == []
    assert rt.reconcile_switch(dpid) is None
    rt.reconcile_all()
    rt.deactivate(1)
    sent = [of_kind(m) for _, m in switches.sent[before:]]
    assert not [m for m in sent if m in ("OFPFlowMod", "OFPMeterMod", "OFPGroupMod")], sent
    lease_valid[0] = True  # renewed: writes again
    assert rt.activate(spec(3, now=clock.now, dst_port=5203)).ok
    assert any(isinstance(m, parser.OFPFlowMod) for _, m in switches.sent[before:])
