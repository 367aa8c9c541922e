"""NAT in the edge router (issue 31): the border declares no ``nat``, the topology names the edge
router as ``nat_router``. A NAT'd host's lane leaves the border untranslated (no set-field, no
``nat()``) towards the edge router, which translates; the replies, un-translated by the router,
come back to the host's own address and reach it by the lane. Asked of the simulated campus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import ip_packet
from tests.support.netsim import Network
from tests.support.paths import CAMPUS_YAML
from viplanes.controller.compile.lane import compile_desired, compile_lane
from viplanes.controller.compile.path import router_translates
from viplanes.controller.compile.shared import lane_addresses
from viplanes.domain.values import LaneSpec
from viplanes.topologies.capcheck import lane_problems
from viplanes.topologies.loader import parse_topology
from viplanes.topologies.model import PortRef, Topology

NOW = 1_700_000_000.0
NAT_IP, CLOUD, DESKTOP_IP = "198.51.100.200", "203.0.113.10", "10.1.0.10"
FW_MAC, NATBOX_MAC = "02:00:00:02:00:01", "02:00:00:03:00:02"
LANE = LaneSpec(7, DESKTOP_IP, CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)


def campus(nat_router: str | None, conntrack: bool = True) -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        sw["conntrack"] = conntrack
        if sw["name"] == "s3":
            sw["features"] = {"nat": False}
    if nat_router:
        data["nat_router"] = nat_router
    return parse_topology(data, "router-nat.yaml")


def rewrites(msgs: list[Any]) -> list[str]:
    """The address rewrites in the messages: set-field of an IPv4 address, or anything naming the
    lane-pool address (``nat(src=...)``; a bare ``nat`` in the reply's ``ct()`` only undoes a
    translation a connection already has)."""
    text = " ".join(str(m.instructions) for m in msgs if isinstance(m, parser.OFPFlowMod))
    return [w for w in ("SetField(ipv4_src", "SetField(ipv4_dst", NAT_IP) if w in text]


@pytest.mark.parametrize("conntrack", [True, False])
def test_the_border_leaves_the_address_alone(conntrack: bool) -> None:
    topo = campus("edge", conntrack)
    assert router_translates(topo)
    s3 = compile_lane(LANE, topo, NOW)[topo.switch("s3").dpid]
    assert rewrites(s3) == []  # neither set_field(ipv4_*) nor nat(src=lane-pool address)
    assert NAT_IP not in lane_addresses(LANE, topo)  # no ARP reply for the lane-pool address


@pytest.mark.parametrize("conntrack", [True, False])
def test_a_lane_through_the_translating_router_carries_both_ways(conntrack: bool) -> None:
    topo = campus("edge", conntrack)
    net = Network(topo)
    desired, refused = compile_desired(topo, [LANE], NOW)
    assert not refused
    net.install(desired)
    desktop = topo.host("desktop")
    syn = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201), tcp_flags=0x002)
    [out] = net.send_from_host("desktop", syn)
    assert (out.kind, out.packet["ipv4_src"], out.packet["eth_dst"]) == ("edge", DESKTOP_IP, topo.edge.inside.mac)
    assert out.left_by("s3", 2) and not out.left_by("s2", 2)  # to the router, past the firewall
    # the router un-translated the reply and routes 10.1.0.0/24 via the NAT box's leg: as it presents it
    reply = dict(ip_packet(topo.edge.inside.mac, NATBOX_MAC, CLOUD, DESKTOP_IP, "tcp", 5201, 40000), tcp_flags=0x012)
    [back] = net.send_from_edge(reply)
    assert (back.kind, back.node, back.port) == ("host", "desktop", PortRef("s1", 1))
    assert back.packet["ipv4_dst"] == DESKTOP_IP and back.packet["eth_dst"] == desktop.iface.mac


@pytest.mark.parametrize("conntrack", [True, False])
def test_an_unsolicited_syn_from_the_router_side_does_not_reach_the_host(conntrack: bool) -> None:
    """The attack: with the host's own address now routable from the edge, open a connection to
    it from the lane's far port. The lane's reply rules refuse it (stateful: +new; stateless:
    a bare SYN carries no ACK)."""
    topo = campus("edge", conntrack)
    net = Network(topo)
    desired, _ = compile_desired(topo, [LANE], NOW)
    net.install(desired)
    syn = dict(ip_packet(topo.edge.inside.mac, NATBOX_MAC, CLOUD, DESKTOP_IP, "tcp", 5201, 22), tcp_flags=0x002)
    outs = net.send_from_edge(syn)
    assert not any(o.kind == "host" and o.node == "desktop" and o.left_by("s2", 3) for o in outs)


def test_without_nat_router_the_border_still_translates_and_check_refuses() -> None:
    topo = campus(None)
    assert not router_translates(topo)
    assert any("lacks nat" in p for p in lane_problems(topo))
    assert lane_problems(campus("edge")) == []


def test_a_nat_middlebox_as_nat_router_is_refused_by_check() -> None:
    """Steering lanes into a NAT middlebox is not built: its replies would return through the
    firewall. ``topology check`` says so rather than accept a file lanes cannot use."""
    problems = lane_problems(campus("nat"))
    assert any("nat_router nat is a middlebox" in p for p in problems), problems
