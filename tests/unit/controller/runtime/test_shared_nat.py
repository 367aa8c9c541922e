"""One lane-pool address per host, shared by that host's live lanes (commit 50c25a8).

Two desktop lanes share nat_ip 198.51.100.193 towards 203.0.113.10, ports 5201 and 5202: their
rules never overlap (the ports tell them apart, in both directions), releasing one leaves the
other delivering both ways, and proxy ARP keeps answering for the address while any lane of the
host holds it (the active set is the union over the runtime's lanes).
"""

from __future__ import annotations

import itertools

import pytest
from os_ken.lib.packet import arp, packet
from os_ken.ofproto.ofproto_v1_3_parser import OFPFlowMod

from tests.support.clock import T0, FakeClock
from tests.support.fake_switches import FakeSwitches, arp_request, inline_runtime
from tests.support.flowsim import ip_packet, make_packet
from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile.lane import lane_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

CLOUD = "203.0.113.10"
SHARED = "198.51.100.193"
DESKTOP = "10.1.0.10"


def lane(lane_id: int, dst_port: int, now: float, dst_ip: str = CLOUD) -> LaneSpec:
    return LaneSpec(
        lane_id=lane_id,
        src_ip=DESKTOP,
        dst_ip=dst_ip,
        protocol="tcp",
        dst_port=dst_port,
        src_port=None,
        nat_ip=SHARED,
        expires_at=now + 3600,
    )


@pytest.fixture
def based_rt(topo: Topology, clock: FakeClock, switches: FakeSwitches) -> LaneRuntime:
    return inline_runtime(topo, clock, switches, base_flows=True)


def answered(rt: LaneRuntime, topo: Topology, target: str) -> bool:
    reply = rt.arp_reply(arp_request(topo, target))
    if reply is None:
        return False
    got = packet.Packet(reply).get_protocol(arp.arp)
    return got.opcode == arp.ARP_REPLY and got.src_ip == target and got.src_mac == topo.lane_pool.mac


def forward(switches: FakeSwitches, topo: Topology, dst_port: int) -> list:
    desktop = topo.host("desktop")
    pkt = ip_packet(desktop.iface.mac, topo.middleboxes[0].inside.mac, DESKTOP, CLOUD, "tcp", 40000, dst_port)
    return switches.net.send_from_host("desktop", pkt)


def reverse(switches: FakeSwitches, topo: Topology, src_port: int) -> list:
    pkt = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, SHARED, "tcp", src_port, 40000)
    return switches.net.send_from_edge(pkt)


def lane_delivers(switches: FakeSwitches, topo: Topology, dst_port: int) -> bool:
    fwd = forward(switches, topo, dst_port)
    rev = reverse(switches, topo, dst_port)
    return [(o.kind, o.packet["ipv4_src"]) for o in fwd] == [("edge", SHARED)] and [
        (o.kind, o.node, o.packet["ipv4_dst"]) for o in rev
    ] == [("host", "desktop", DESKTOP)]


def arp_frame(topo: Topology) -> dict:
    return make_packet(
        eth_src=topo.edge.inside.mac,
        eth_dst="ff:ff:ff:ff:ff:ff",
        eth_type=0x0806,
        arp_op=1,
        arp_spa=str(topo.edge.inside.ip.ip),
        arp_tpa=SHARED,
    )


def arp_punted(switches: FakeSwitches, topo: Topology) -> bool:
    return [o.kind for o in switches.net.send_from_edge(arp_frame(topo))] == ["CONTROLLER"]


def switch_answers_arp(switches: FakeSwitches, topo: Topology) -> bool:
    """The border switch itself turns the edge router's request into the reply (no controller)."""
    outs = switches.net.send_from_edge(arp_frame(topo))
    return [
        (
            o.kind,
            o.leg,
            o.packet["arp_op"],
            o.packet["arp_spa"],
            o.packet["arp_sha"],
            o.packet["arp_tpa"],
            o.packet["eth_dst"],
        )
        for o in outs
    ] == [("edge", "inside", 2, SHARED, topo.lane_pool.mac, str(topo.edge.inside.ip.ip), topo.edge.inside.mac)]


def exact(msg) -> dict:
    return dict(msg.match.items())


def overlap(a, b) -> bool:
    """Could one packet match both flows? (Only exact fields are used by lane rules.)"""
    ma, mb = exact(a), exact(b)
    return (
        (a.priority, a.table_id) == (b.priority, b.table_id)
        and all(ma[k] == mb[k] for k in ma.keys() & mb.keys() if k != "ct_mark")
        and (ma.get("ct_mark") == mb.get("ct_mark"))
    )


@pytest.mark.parametrize(
    "second", [dict(dst_port=5202), dict(dst_port=5201, dst_ip="203.0.113.11")], ids=["other-port", "other-dst"]
)
def test_lanes_sharing_a_nat_ip_never_overlap(topo: Topology, second: dict) -> None:
    now = T0
    one = compiler.compile_lane(lane(1, 5201, now), topo, now)
    two = compiler.compile_lane(lane(2, now=now, **second), topo, now)
    assert one.keys() == two.keys()
    for dpid in one:
        flows = [[m for m in msgs[dpid] if isinstance(m, OFPFlowMod)] for msgs in (one, two)]
        for a, b in itertools.product(*flows):
            assert not overlap(a, b), (dpid, exact(a), exact(b))
    # the reverse rules (matching ipv4_dst on the shared address or the host behind it) carry
    # the far end's port/address that identifies their own lane
    rev = [
        (exact(m), m.cookie)
        for d in one
        for m in one[d] + two[d]
        if isinstance(m, OFPFlowMod) and exact(m).get("ipv4_src") in (CLOUD, "203.0.113.11")
    ]
    assert {(m["ipv4_src"], m["tcp_src"], c) for m, c in rev} == {
        (CLOUD, 5201, lane_cookie(1)),
        (second.get("dst_ip", CLOUD), second["dst_port"], lane_cookie(2)),
    }


def test_release_one_lane_keeps_the_other_and_its_arp(based_rt, switches, topo, clock) -> None:
    assert based_rt.activate(lane(1, 5201, clock.now)).ok
    assert based_rt.activate(lane(2, 5202, clock.now)).ok
    assert lane_delivers(switches, topo, 5201) and lane_delivers(switches, topo, 5202)
    assert answered(based_rt, topo, SHARED) and switch_answers_arp(switches, topo)

    based_rt.deactivate(1)
    assert all(e.cookie != lane_cookie(1) for t in switches.net.tables.values() for e in t.flows)
    assert lane_delivers(switches, topo, 5202)  # forward and reverse, still on the lane
    assert not lane_delivers(switches, topo, 5201)  # back on the default path
    assert answered(based_rt, topo, SHARED) and switch_answers_arp(switches, topo)

    based_rt.deactivate(2)
    assert not answered(based_rt, topo, SHARED)  # no lane holds the address any more
    assert arp_punted(switches, topo)  # the switch's own answer went with the last lane


def test_reconcile_dropping_one_lane_keeps_the_other_and_its_arp(based_rt, switches, topo, clock) -> None:
    first, second = lane(1, 5201, clock.now), lane(2, 5202, clock.now)
    assert based_rt.activate(first).ok and based_rt.activate(second).ok
    based_rt.attach_source(lambda: [second])  # lane 1 released in the database, switch not told
    based_rt.reconcile_all()
    assert 1 not in based_rt.lanes and 2 in based_rt.lanes
    assert lane_delivers(switches, topo, 5202) and not lane_delivers(switches, topo, 5201)
    assert answered(based_rt, topo, SHARED) and switch_answers_arp(switches, topo)
    based_rt.attach_source(lambda: [])
    based_rt.reconcile_all()
    assert arp_punted(switches, topo)  # reconcile removed the shared flow with the last lane
