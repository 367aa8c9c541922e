"""A takeover lane (a connection running through the campus NAT, moved onto a lane), checked by
what packets do in the simulated campus: the exact 5-tuple both ways, the NAT's own address and
port towards the cloud, never a lane-pool address, and nothing shared at the border."""

from __future__ import annotations

import dataclasses

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import T0 as NOW
from tests.support.flowsim import ip_packet, make_packet
from tests.support.netsim import Network
from viplanes.controller.compile import shared
from viplanes.controller.compile.lane import LaneCompileError, compile_base, compile_desired, compile_lane
from viplanes.controller.compile.takeover import split_diversion
from viplanes.domain.values import LaneSpec, NatMapping
from viplanes.topologies.model import Topology

CLOUD, NAT_BOX, NAT_PORT, SPORT = "203.0.113.10", "198.51.100.2", 51234, 40000


@pytest.fixture
def lane() -> LaneSpec:
    return LaneSpec(7, "10.1.0.10", CLOUD, "tcp", 5201, SPORT, None, NOW + 60, takeover=NatMapping(NAT_BOX, NAT_PORT))


@pytest.fixture
def net(topo: Topology, lane: LaneSpec) -> Network:
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(compile_lane(lane, topo, NOW))
    return net


def upload(topo: Topology, **change: object) -> dict:
    fw_mac = topo.middleboxes[0].inside.mac  # the desktop's gateway
    pkt = ip_packet(topo.host("desktop").iface.mac, fw_mac, "10.1.0.10", CLOUD, "tcp", SPORT, 5201)
    pkt.update(make_packet(**change))
    return pkt


def reply(topo: Topology, **change: object) -> dict:
    nat_mac = topo.middleboxes[1].outside.mac  # the edge router addresses the NAT box
    pkt = ip_packet(topo.edge.inside.mac, nat_mac, CLOUD, NAT_BOX, "tcp", 5201, NAT_PORT)
    pkt.update(make_packet(**change))
    return pkt


def test_the_cloud_sees_the_nat_address_and_port(net: Network, topo: Topology) -> None:
    (out,) = net.send_from_host("desktop", upload(topo))
    assert (out.kind, out.leg) == ("edge", "inside")
    assert out.left_by("s2", 3)  # the bypass, not the firewall
    assert (out.packet["ipv4_src"], out.packet["tcp_src"]) == (NAT_BOX, NAT_PORT)
    assert (out.packet["eth_dst"], out.packet["eth_src"]) == (topo.edge.inside.mac, topo.lane_pool.mac)


def test_the_reply_is_restored_to_the_host(net: Network, topo: Topology) -> None:
    (out,) = net.send_from_edge(reply(topo))
    assert (out.kind, out.node) == ("host", "desktop")
    assert (out.packet["ipv4_dst"], out.packet["tcp_dst"]) == ("10.1.0.10", SPORT)
    assert out.packet["eth_dst"] == topo.host("desktop").iface.mac


@pytest.mark.parametrize(
    "change",
    [{"tcp_src": SPORT + 1}, {"tcp_dst": 5202}, {"ipv4_dst": "203.0.113.11"}],
)
def test_another_connection_of_the_desktop_keeps_the_campus_path(
    net: Network, topo: Topology, change: dict[str, object]
) -> None:
    (out,) = net.send_from_host("desktop", upload(topo, **change))
    assert out.kind == "NORMAL"  # through the firewall and the NAT box as before


@pytest.mark.parametrize(
    "change",
    [{"tcp_dst": NAT_PORT + 1}, {"tcp_src": 5202}, {"ipv4_src": "203.0.113.11"}, {"tcp_flags": 0x002}],
)
def test_only_the_exact_reply_tuple_is_taken_from_the_nat_box(
    net: Network, topo: Topology, change: dict[str, object]
) -> None:
    """Every other packet to the NAT box's address (its other connections, a bare SYN to the
    taken-over port) goes to the box as before."""
    (out,) = net.send_from_edge(reply(topo, **change))
    assert out.kind == "NORMAL"


def test_no_lane_pool_address_and_nothing_shared(topo: Topology, lane: LaneSpec) -> None:
    """No ARP reply for the NAT box's address (the box answers for itself), no ICMP flows, no
    pool address anywhere in the lane's flows."""
    assert shared.lane_addresses(lane, topo) == {}
    flows = [m for msgs in compile_lane(lane, topo, NOW).values() for m in msgs if isinstance(m, parser.OFPFlowMod)]
    text = " ".join(str(m.match) + str(m.instructions) for m in flows)
    assert "198.51.100.19" not in text and "198.51.100.2" in text  # the pool is 198.51.100.192/27
    base, _ = compile_desired(topo, [], NOW)
    with_lane, refused = compile_desired(topo, [lane], NOW)
    assert refused == {}
    added = sum(len(v) for v in with_lane.values()) - sum(len(v) for v in base.values())
    assert added == len(flows) == 6  # forward and reverse on s1, s2, s3


@pytest.mark.parametrize(
    "change, why",
    [
        ({"takeover": NatMapping("198.51.100.30", NAT_PORT)}, "no NAT box's outside address"),
        ({"takeover": NatMapping(NAT_BOX, 0)}, "not 1..65535"),
        ({"src_port": None}, "exact 5-tuple"),
        ({"nat_ip": "198.51.100.200"}, "no lane-pool address"),
    ],
)
def test_refused_takeovers(topo: Topology, lane: LaneSpec, change: dict[str, object], why: str) -> None:
    """A takeover may only ever translate to a NAT box's own address, for one exact connection."""
    with pytest.raises(LaneCompileError, match=why):
        compile_lane(dataclasses.replace(lane, **change), topo, NOW)  # type: ignore[arg-type]


def test_the_replies_move_first_and_the_data_last(topo: Topology, lane: LaneSpec) -> None:
    """``split_diversion``'s first step alone: the far end's ACKs already reach the desktop by the
    lane while its data still goes through the firewall and the NAT box (whose conntrack would
    reset the far end for an ACK of data it never saw); the second step is the one flow that
    moves the data."""
    before, after = split_diversion(lane, topo, compile_lane(lane, topo, NOW))
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(before)
    (data,) = net.send_from_host("desktop", upload(topo))
    assert data.kind == "NORMAL"
    (ack,) = net.send_from_edge(reply(topo))
    assert (ack.kind, ack.node) == ("host", "desktop")
    assert [(dpid, len(msgs)) for dpid, msgs in after.items()] == [(topo.switch("s1").dpid, 1)]
    net.install(after)
    (data,) = net.send_from_host("desktop", upload(topo))
    assert (data.kind, data.leg) == ("edge", "inside")
