"""A takeover lane goes in replies first, data last (``takeover.split_diversion``): the forward
diversion at the first switch leaves only after every switch of the path confirmed the rest, and
never when one of them did not (the NAT box would otherwise meet ACKs for data it never saw and
reset the far end)."""

from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import CLOUD, FakeSwitches, inline_runtime, spec
from tests.support.flowsim import ip_packet
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.controller.runtime import batch
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec, NatMapping
from viplanes.topologies.model import Topology

SPORT, NAT_PORT = 40000, 51234


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "DIVERT_GRACE_S", 0.0)


def takeover(topo: Topology) -> LaneSpec:
    nat_box = next(str(mb.outside.ip.ip) for mb in topo.middleboxes if mb.kind == "nat")
    return spec(7, src_port=SPORT, nat_ip=None, takeover=NatMapping(nat_box, NAT_PORT))


def world(topo: Topology) -> tuple[FakeSwitches, LaneRuntime]:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    return switches, inline_runtime(topo, clock, switches, base_flows=True)


def is_diversion(topo: Topology, dpid: int, msg: object) -> bool:
    first = topo.host("desktop").iface.attach
    assert first is not None
    return (
        isinstance(msg, parser.OFPFlowMod)
        and msg.cookie == lane_cookie(7)
        and dpid == topo.switch(first.switch).dpid
        and msg.match.get("in_port") == first.port
    )


def upload_goes(switches: FakeSwitches, topo: Topology) -> str:
    fw_mac = topo.middleboxes[0].inside.mac
    pkt = ip_packet(topo.host("desktop").iface.mac, fw_mac, "10.1.0.10", CLOUD, "tcp", SPORT, 5201)
    (out,) = switches.net.send_from_host("desktop", pkt)
    return out.kind


def test_the_diversion_leaves_after_every_barrier_of_the_rest(topo: Topology) -> None:
    switches, rt = world(topo)
    switches.sent.clear()
    result = rt.activate(takeover(topo))
    assert result.ok, result.reason
    at = next(i for i, (dpid, msg) in enumerate(switches.sent) if is_diversion(topo, dpid, msg))
    first_step = {dpid for dpid, msg in switches.sent[:at] if isinstance(msg, parser.OFPFlowMod)}
    barriers = {dpid for dpid, msg in switches.sent[:at] if isinstance(msg, parser.OFPBarrierRequest)}
    assert len(first_step) == 3 and first_step <= barriers  # s1's reverse transit, s2, the border
    assert isinstance(switches.sent[at + 1][1], parser.OFPBarrierRequest)  # and its own barrier
    assert upload_goes(switches, topo) == "edge"


@pytest.mark.parametrize("how", ["border silent", "border refuses"])
def test_no_diversion_when_the_rest_is_not_confirmed(topo: Topology, how: str) -> None:
    switches, rt = world(topo)
    border = topo.switch("s3").dpid
    if how == "border silent":
        switches.mute.add(border)
    else:
        switches.refuse = lambda dpid, msg: (
            dpid == border and isinstance(msg, parser.OFPFlowMod) and msg.cookie == lane_cookie(7)
        )
    switches.sent.clear()
    result = rt.activate(takeover(topo), timeout_s=0.3)
    assert not result.ok
    assert not any(is_diversion(topo, dpid, msg) for dpid, msg in switches.sent)
    assert upload_goes(switches, topo) == "NORMAL"  # the connection stays with the NAT box
