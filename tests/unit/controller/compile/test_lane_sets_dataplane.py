"""Issue 11, data plane: lanes with several destinations, port ranges and IPv6, asked through the
flow-table simulator (what packets do), plus the flow-count formula and re-activation with a
changed set (stale flows deleted strictly, after the new ADDs)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.flowsim import icmp6_error, ip6_packet, ip_packet, make_packet
from tests.support.netsim import Network
from tests.support.paths import REPO
from viplanes.controller.compile import base as guardflows
from viplanes.controller.compile import ndguard
from viplanes.controller.compile.lane import compile_base, compile_desired, compile_lane
from viplanes.domain.values import LaneSpec
from viplanes.lanes.targets import lane_budget
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

NOW = 1_700_000_000.0
NAT_IP = "198.51.100.200"
CLOUDS = ("203.0.113.10", "203.0.113.11", "203.0.113.12")
DESKTOP6, CLOUD6 = "2001:db8:1::10", "2001:db8:ff::10"
DUALSTACK = REPO / "topologies" / "campus-dualstack.yaml"


def stateless_topo(tmp_path: Path) -> Topology:
    text = DUALSTACK.read_text().replace(
        "{name: s3, dpid: 3, role: border", "{name: s3, dpid: 3, role: border, conntrack: false"
    )
    path = tmp_path / "stateless.yaml"
    path.write_text(text)
    return load_topology(path)


def set_lane(
    lane_id: int = 7,
    nets: tuple[str, ...] = tuple(f"{c}/32" for c in CLOUDS),
    ports: tuple[tuple[int, int], ...] = ((5201, 5203),),
    src_ip: str = "10.1.0.10",
    nat_ip: str | None = NAT_IP,
    protocol: str = "tcp",
) -> LaneSpec:
    return LaneSpec(
        lane_id=lane_id,
        src_ip=src_ip,
        dst_ip=None,
        protocol=protocol,  # type: ignore[arg-type]
        dst_port=None,
        src_port=None,
        nat_ip=nat_ip,
        expires_at=NOW + 3600,
        dst_nets=nets,
        dst_ports=ports,
    )


def network(topo: Topology, *lanes: LaneSpec) -> Network:
    net = Network(topo)
    net.install(compile_desired(topo, lanes, NOW)[0])
    return net


def only(outcomes: list) -> Any:
    assert len(outcomes) == 1, outcomes
    return outcomes[0]


def v4_out(topo: Topology, dst: str, port: int) -> dict:
    return ip_packet(
        topo.host("desktop").iface.mac, topo.middleboxes[0].inside.mac, "10.1.0.10", dst, "tcp", 40000, port
    )


def v6_out(topo: Topology, dst: str = CLOUD6, port: int | None = 5201, **change: Any) -> dict:
    pkt = ip6_packet(
        topo.host("desktop").iface.mac,
        topo.middleboxes[0].inside.mac,
        DESKTOP6,
        dst,
        "tcp",
        40000 if port is not None else None,
        port,
    )
    pkt.update(make_packet(**change))
    return pkt


def v6_back(topo: Topology, port: int = 5201) -> dict:
    return ip6_packet(topo.edge.inside.mac, topo.host("desktop").iface.mac, CLOUD6, DESKTOP6, "tcp", port, 40000)


# ---- several destinations, port ranges ------------------------------------------------------
def test_every_destination_and_port_of_the_set_takes_the_lane(dual: Topology) -> None:
    net = network(dual, set_lane())
    for dst in CLOUDS:
        for port in (5201, 5202, 5203):
            out = only(net.send_from_host("desktop", v4_out(dual, dst, port)))
            assert out.kind == "edge" and out.left_by("s2", 3), (dst, port)
            assert out.packet["ipv4_src"] == NAT_IP
            back = ip_packet(dual.edge.inside.mac, dual.lane_pool.mac, dst, NAT_IP, "tcp", port, 40000)
            home = only(net.send_from_edge(back))
            assert (home.kind, home.node, home.packet["ipv4_dst"]) == ("host", "desktop", "10.1.0.10")


@pytest.mark.parametrize("dst,port", [(CLOUDS[0], 5200), (CLOUDS[0], 5204), ("203.0.113.13", 5201)])
def test_outside_the_set_takes_the_normal_path(dual: Topology, dst: str, port: int) -> None:
    net = network(dual, set_lane())
    assert only(net.send_from_host("desktop", v4_out(dual, dst, port))).kind == "NORMAL"


def test_a_prefix_lane_carries_its_whole_network(dual: Topology) -> None:
    net = network(dual, set_lane(nets=("203.0.113.16/28",), ports=((50000, 51000),)))
    for dst, port in (("203.0.113.16", 50000), ("203.0.113.31", 51000), ("203.0.113.20", 50511)):
        assert only(net.send_from_host("desktop", v4_out(dual, dst, port))).kind == "edge"
    for dst, port in (("203.0.113.32", 50000), ("203.0.113.20", 51001), ("203.0.113.20", 49999)):
        assert only(net.send_from_host("desktop", v4_out(dual, dst, port))).kind == "NORMAL"


# ---- IPv6 ------------------------------------------------------------------------------------
@pytest.fixture
def v6_net(dual: Topology) -> Network:
    return network(dual, set_lane(nets=(f"{CLOUD6}/128",), ports=((5201, 5201),), src_ip=DESKTOP6, nat_ip=None))


def test_v6_lane_forward_untranslated_and_replies_come_back(v6_net: Network, dual: Topology) -> None:
    out = only(v6_net.send_from_host("desktop", v6_out(dual)))
    assert (out.kind, out.leg) == ("edge", "inside") and out.left_by("s2", 3)
    assert (out.packet["ipv6_src"], out.packet["ipv6_dst"]) == (DESKTOP6, CLOUD6)
    assert out.packet["eth_src"] == dual.host("desktop").iface.mac  # no lane address on v6
    home = only(v6_net.send_from_edge(v6_back(dual)))
    assert (home.kind, home.node) == ("host", "desktop") and home.left_by("s2", 1)
    assert home.packet["eth_src"] == dual.middleboxes[0].inside.mac  # its v6 gateway's MAC


def test_v6_inbound_connection_is_not_a_lane_reply(v6_net: Network, dual: Topology) -> None:
    syn = dict(v6_back(dual), tcp_flags=0x002)  # nothing went out first: conntrack says +new
    out = only(v6_net.send_from_edge(syn))
    assert out.kind == "NORMAL" and not out.left_by("s3", 3)  # the normal path, never the bypass


def test_v6_wrong_source_or_mac_is_not_steered(v6_net: Network, dual: Topology) -> None:
    for change in ({"ipv6_src": "2001:db8:1::11"}, {"eth_src": "02:00:00:01:00:99"}, {"tcp_dst": 5202}):
        assert only(v6_net.send_from_host("desktop", v6_out(dual, **change))).kind == "NORMAL"


def test_v6_packet_too_big_for_a_lane_connection_reaches_the_host(v6_net: Network, dual: Topology) -> None:
    sent = only(v6_net.send_from_host("desktop", v6_out(dual))).packet
    ptb = icmp6_error(dual.edge.inside.mac, dual.host("desktop").iface.mac, "2001:db8:3::1", DESKTOP6, sent)
    home = only(v6_net.send_from_edge(ptb))
    assert (home.kind, home.node) == ("host", "desktop") and home.left_by("s2", 1)
    assert home.packet["icmpv6_type"] == 2


def test_v6_packet_too_big_for_no_lane_connection_takes_the_normal_path(v6_net: Network, dual: Topology) -> None:
    other = v6_out(dual, port=443)  # never sent on the lane: conntrack knows no such connection
    ptb = icmp6_error(dual.edge.inside.mac, dual.host("desktop").iface.mac, "2001:db8:3::1", DESKTOP6, other)
    assert only(v6_net.send_from_edge(ptb)).kind == "NORMAL"


@pytest.mark.parametrize("icmp_type", [133, 134, 135, 136])
def test_neighbour_discovery_keeps_the_normal_path(v6_net: Network, dual: Topology, icmp_type: int) -> None:
    nd = make_packet(
        eth_src=dual.host("desktop").iface.mac,
        eth_dst="33:33:ff:00:00:01",
        eth_type=0x86DD,
        ip_proto=58,
        ipv6_src=DESKTOP6,
        ipv6_dst="ff02::1:ff00:1",
        icmpv6_type=icmp_type,
        icmpv6_code=0,
        ipv6_nd_target=DESKTOP6 if icmp_type in (135, 136) else None,
    )
    # an RA from a host is the RA guard's (test_ndguard.py): dropped; the rest keeps NORMAL
    assert only(v6_net.send_from_host("desktop", nd)).kind == ("drop" if icmp_type == 134 else "NORMAL")
    from_edge = dict(nd, eth_src=dual.edge.inside.mac, ipv6_src="2001:db8:3::1")
    if icmp_type == 136:
        from_edge["ipv6_nd_target"] = "2001:db8:3::1"  # the edge advertises itself, not the desktop
    assert only(v6_net.send_from_edge(from_edge)).kind == "NORMAL"  # not through conntrack


def test_v6_non_first_fragments_take_the_normal_path(v6_net: Network, dual: Topology) -> None:
    """No L4 header (OVS reports ports 0): no lane rule matches; the first fragment does."""
    assert only(v6_net.send_from_host("desktop", v6_out(dual, port=None))).kind == "NORMAL"
    assert only(v6_net.send_from_host("desktop", v6_out(dual))).kind == "edge"


def test_v4_non_first_fragments_take_the_normal_path(dual: Topology) -> None:
    net = network(dual, set_lane())
    frag = make_packet(
        eth_src=dual.host("desktop").iface.mac,
        eth_dst=dual.middleboxes[0].inside.mac,
        eth_type=0x0800,
        ip_proto=6,
        ipv4_src="10.1.0.10",
        ipv4_dst=CLOUDS[0],
    )
    assert only(net.send_from_host("desktop", frag)).kind == "NORMAL"


def test_dual_stack_lane_carries_both_families(dual: Topology) -> None:
    lane = set_lane(nets=(f"{CLOUDS[0]}/32", f"{CLOUD6}/128"), ports=((5201, 5201),))
    net = network(dual, lane)
    assert only(net.send_from_host("desktop", v4_out(dual, CLOUDS[0], 5201))).packet["ipv4_src"] == NAT_IP
    assert only(net.send_from_host("desktop", v6_out(dual))).packet["ipv6_src"] == DESKTOP6
    assert only(net.send_from_edge(v6_back(dual))).node == "desktop"


def test_v6_lane_from_a_host_without_ip6_is_refused(dual: Topology) -> None:
    with pytest.raises(ValueError, match="no IPv6 address"):
        compile_lane(set_lane(nets=(f"{CLOUD6}/128",), src_ip="10.1.0.20", nat_ip=NAT_IP), dual, NOW)


def test_v6_destination_inside_the_campus_is_refused(dual: Topology) -> None:
    with pytest.raises(ValueError, match="inside the campus"):
        compile_lane(set_lane(nets=("2001:db8:3::30/128",), src_ip=DESKTOP6, nat_ip=None), dual, NOW)


# ---- the flow-count formula ------------------------------------------------------------------
V4_DSTS = [f"203.0.113.{i}/32" for i in range(10, 20)] + ["203.0.113.64/28"]
V6_DSTS = [f"2001:db8:ff::{i:x}/128" for i in range(16, 26)] + ["2001:db8:ff:1::/64"]


@settings(max_examples=60, deadline=None)
@given(
    nets=st.lists(st.sampled_from(V4_DSTS + V6_DSTS), min_size=1, max_size=4, unique=True),
    lo=st.integers(1, 65000),
    width=st.integers(0, 600),
    src=st.sampled_from(["desktop", "dtn"]),
    stateful=st.booleans(),
    proto=st.sampled_from(["tcp", "udp"]),
)
def test_flow_count_formula_equals_the_compiled_flows(
    tmp_path_factory: Any, nets: list[str], lo: int, width: int, src: str, stateful: bool, proto: str
) -> None:
    topo = load_topology(DUALSTACK) if stateful else stateless_topo(tmp_path_factory.mktemp("t"))
    host = topo.host(src)
    lane = set_lane(
        nets=tuple(nets),
        ports=((lo, min(lo + width, 65535)),),
        src_ip=str(host.iface.ip.ip),
        nat_ip=NAT_IP if host.needs_nat else None,
        protocol=proto,
    )
    flows = [m for msgs in compile_lane(lane, topo, NOW).values() for m in msgs if isinstance(m, parser.OFPFlowMod)]
    _, formula = lane_budget(lane.src_ip, None, None, list(lane.dst_nets), [list(r) for r in lane.dst_ports], topo)
    assert formula == len(flows)


# ---- re-activation with a changed set --------------------------------------------------------
class Recorder:
    """Wraps the fake switches' send: keeps every batch as sent."""

    def __init__(self, switches: FakeSwitches) -> None:
        self.inner, self.batches = switches.send, []

    def __call__(self, dpid: int, ofmsgs: list[Any]) -> bool:
        self.batches.append((dpid, list(ofmsgs)))
        return self.inner(dpid, ofmsgs)


@pytest.fixture
def dual_switches(dual: Topology, clock: FakeClock) -> FakeSwitches:
    return FakeSwitches(dual, clock)


def test_reactivation_with_a_smaller_set_deletes_only_the_dropped_destination(
    dual: Topology, clock: FakeClock, dual_switches: FakeSwitches
) -> None:
    rt = inline_runtime(dual, clock, dual_switches, base_flows=True)
    clock.now = NOW
    first = set_lane()
    assert rt.activate(first).ok
    smaller = dataclasses.replace(first, dst_nets=tuple(f"{c}/32" for c in CLOUDS[:2]))
    rec = Recorder(dual_switches)
    rt.send = rec
    assert rt.activate(smaller).ok
    net = dual_switches.net
    for dst in CLOUDS[:2]:
        assert only(net.send_from_host("desktop", v4_out(dual, dst, 5202))).kind == "edge"
    assert only(net.send_from_host("desktop", v4_out(dual, CLOUDS[2], 5202))).kind == "NORMAL"
    deletes = 0
    for _, msgs in rec.batches:  # in each batch every delete comes after every add
        kinds = [m.command for m in msgs if isinstance(m, parser.OFPFlowMod)]
        deletes += kinds.count(ofp.OFPFC_DELETE_STRICT)
        if ofp.OFPFC_DELETE_STRICT in kinds:
            assert ofp.OFPFC_ADD not in kinds[kinds.index(ofp.OFPFC_DELETE_STRICT) :]
        assert ofp.OFPFC_DELETE not in kinds  # nothing non-strict: the kept addresses stay
    # the one dropped destination: 2 masked entries (5201, 5202/0xfffe) x 3 hops x fwd + rev
    assert deletes == 2 * 3 * 2
    assert rt.lanes[first.lane_id] == smaller


def test_reactivation_with_a_larger_set_adds_and_deletes_nothing(
    dual: Topology, clock: FakeClock, dual_switches: FakeSwitches
) -> None:
    rt = inline_runtime(dual, clock, dual_switches, base_flows=True)
    clock.now = NOW
    first = set_lane(nets=(f"{CLOUDS[0]}/32",))
    assert rt.activate(first).ok
    rec = Recorder(dual_switches)
    rt.send = rec
    assert rt.activate(dataclasses.replace(first, dst_nets=tuple(f"{c}/32" for c in CLOUDS))).ok
    assert not any(
        m.command == ofp.OFPFC_DELETE_STRICT
        for _, msgs in rec.batches
        for m in msgs
        if isinstance(m, parser.OFPFlowMod)
    )
    for dst in CLOUDS:
        assert only(dual_switches.net.send_from_host("desktop", v4_out(dual, dst, 5201))).kind == "edge"


def test_base_flows_of_a_dual_stack_border_relate_icmpv6_errors(dual: Topology) -> None:
    border = compile_base(dual)[3]
    icmpv6 = [m for m in border if isinstance(m, parser.OFPFlowMod) and "icmpv6_type" in m.match]
    related = sorted(m.match["icmpv6_type"] for m in icmpv6 if m.priority == guardflows.PRIORITY_RELATED)
    assert related == [1, 2, 3]  # never ND (133..137)
    # the other ND flows are the host source guards' drops of a spoofed neighbour advertisement
    # and the ND guard's band (test_ndguard.py), never conntrack
    nd_band = range(ndguard.PRIORITY_RA_DROP, ndguard.PRIORITY_ND_TRUSTED + 1)
    assert all(
        m.priority == guardflows.PRIORITY_GUARD and not m.instructions
        for m in icmpv6
        if m.priority != guardflows.PRIORITY_RELATED and m.priority not in nd_band
    )
