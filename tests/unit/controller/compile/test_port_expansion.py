"""Port ranges through a switch without masked port matches (issue 31): the compiler expands the
range to exact ports on that switch only (the minimal prefix cover elsewhere), and the lane carries
exactly its range, no port more, asked of the simulated campus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import ip_packet
from tests.support.netsim import Network
from tests.support.paths import CAMPUS_YAML
from viplanes.controller.compile.lane import compile_desired, compile_lane
from viplanes.domain.portmasks import ranges_to_masks
from viplanes.domain.values import LaneSpec
from viplanes.lanes.targets import lane_budget
from viplanes.topologies.loader import parse_topology
from viplanes.topologies.model import Topology

NOW = 1_700_000_000.0
NAT_IP, CLOUD, DESKTOP_IP = "198.51.100.200", "203.0.113.10", "10.1.0.10"
FW_MAC = "02:00:00:02:00:01"


def maskless(*switches: str, conntrack: bool = True) -> Topology:
    """The campus with ``switches`` declaring ``masked_ports: false``."""
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] in switches:
            sw["features"] = {"masked_ports": False}
        if not conntrack:
            sw["conntrack"] = False
    return parse_topology(data, "maskless.yaml")


def range_lane(lo: int, hi: int, lane_id: int = 7) -> LaneSpec:
    return LaneSpec(lane_id, DESKTOP_IP, CLOUD, "tcp", None, None, NAT_IP, NOW + 3600, dst_ports=((lo, hi),))


def tcp_dst_matches(topo: Topology, spec: LaneSpec, switch: str) -> list[Any]:
    """The ``tcp_dst`` of every forward lane flow on ``switch`` (as os-ken reads the match back)."""
    dpid = topo.switch(switch).dpid
    msgs = compile_lane(spec, topo, NOW)[dpid]
    return [m.match["tcp_dst"] for m in msgs if isinstance(m, parser.OFPFlowMod) and "tcp_dst" in m.match]


def test_only_the_maskless_switch_gets_exact_ports():
    topo = maskless("s2")
    spec = range_lane(9000, 9100)
    on_s2 = tcp_dst_matches(topo, spec, "s2")
    assert sorted(on_s2) == list(range(9000, 9101))  # every port once, never a (value, mask)
    on_s1 = tcp_dst_matches(topo, spec, "s1")
    assert len(on_s1) == len(ranges_to_masks([(9000, 9100)])) == 6  # s1 keeps the prefix cover


def test_the_flow_count_formula_follows_the_expansion():
    topo = maskless("s2")
    spec = range_lane(9000, 9100)
    flows = sum(isinstance(m, parser.OFPFlowMod) for msgs in compile_lane(spec, topo, NOW).values() for m in msgs)
    _, formula = lane_budget(DESKTOP_IP, CLOUD, None, [CLOUD], [[9000, 9100]], topo)
    assert formula == flows == 2 * (6 + 101 + 6) + 4


@settings(max_examples=40, deadline=None)
@given(
    lo=st.integers(1, 65535 - 40),
    width=st.integers(0, 40),
    offset=st.integers(-3, 43),
    stateful=st.booleans(),
)
def test_a_range_lane_carries_exactly_its_ports_through_a_maskless_switch(
    lo: int, width: int, offset: int, stateful: bool
) -> None:
    """The expansion covers the range and no port more: a SYN to a port inside leaves by the
    lane (translated at the border), one outside does not."""
    topo = maskless("s2", conntrack=stateful)
    hi = lo + width
    port = lo + offset
    if not 1 <= port <= 65535:
        return
    net = Network(topo)
    desired, refused = compile_desired(topo, [range_lane(lo, hi)], NOW)
    assert not refused
    net.install(desired)
    desktop = topo.host("desktop")
    syn = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, port), tcp_flags=0x002)
    by_lane = any(o.kind == "edge" and o.packet["ipv4_src"] == NAT_IP for o in net.send_from_host("desktop", syn))
    assert by_lane == (lo <= port <= hi)


def test_s2_matches_are_all_exact_for_any_range():
    topo = maskless("s2")
    for lo, hi in [(1, 1), (1024, 1031), (65530, 65535), (50000, 50063)]:
        on_s2 = tcp_dst_matches(topo, range_lane(lo, hi), "s2")
        assert all(isinstance(p, int) for p in on_s2) and sorted(on_s2) == list(range(lo, hi + 1))
