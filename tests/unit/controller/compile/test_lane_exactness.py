"""A lane opens exactly its own flow (issue 9), asked of the simulated campus: stateful replies,
no second door, switch-side ARP, and the stateless fallback's stated limits."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.flowsim import icmp_error, ip_packet, make_packet
from tests.support.netsim import Network
from tests.support.paths import REPO
from viplanes.controller.compile.lane import compile_base, compile_desired, compile_lane
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import PortRef, Topology

NOW = 1_700_000_000.0
NAT_IP, CLOUD, DESKTOP_IP = "198.51.100.200", "203.0.113.10", "10.1.0.10"
FW_MAC = "02:00:00:02:00:01"


def campus(conntrack: bool = True) -> Topology:
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    if conntrack:
        return topo
    switches = tuple(dataclasses.replace(s, conntrack=False) for s in topo.switches)
    return dataclasses.replace(topo, switches=switches)


DESKTOP_LANE = LaneSpec(7, DESKTOP_IP, CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)
DTN_LANE = LaneSpec(9, "198.51.100.30", CLOUD, "tcp", 5201, None, None, NOW + 3600)


def network(topo: Topology, *lanes: LaneSpec) -> Network:
    net = Network(topo)
    desired, refused = compile_desired(topo, lanes, NOW)
    assert not refused
    net.install(desired)
    return net


def opened(topo: Topology) -> tuple[Network, dict]:
    """The campus with the desktop lane up and one connection it opened (40000 -> 5201)."""
    net = network(topo, DESKTOP_LANE, DTN_LANE)
    desktop = topo.host("desktop")
    syn = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201), tcp_flags=0x002)
    [out] = net.send_from_host("desktop", syn)
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP)
    return net, out.packet


def from_edge(
    topo: Topology, src: str, dst: str, sport: int, dport: int, flags: int = 0x010, proto: str = "tcp"
) -> dict:
    pkt = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, src, dst, proto, sport, dport)
    return dict(pkt, tcp_flags=flags) if proto == "tcp" else pkt


def reached_desktop(outcomes: list) -> bool:
    return any(o.kind == "host" and o.node == "desktop" for o in outcomes)


def crossed_bypass(outcomes: list) -> bool:
    return any(o.left_by("s2", 3) or o.left_by("s3", 3) for o in outcomes)


# ---- stateful replies --------------------------------------------------------------------
def test_reply_of_a_lane_connection_reaches_the_desktop_un_natted() -> None:
    topo = campus()
    net, _ = opened(topo)
    [out] = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 40000, flags=0x012))
    assert (out.kind, out.node, out.port) == ("host", "desktop", PortRef("s1", 1))
    assert (out.packet["ipv4_dst"], out.packet["eth_dst"]) == (DESKTOP_IP, "02:00:00:01:00:10")
    assert out.packet["eth_src"] == FW_MAC and out.left_by("s3", 3)


@pytest.mark.parametrize("dport", [22, 2222, 40001])
def test_inbound_syn_from_the_lane_port_is_dropped(dport: int) -> None:
    topo = campus()
    net, _ = opened(topo)
    for flags in (0x002, 0x010, 0x012):  # SYN, a stray ACK, SYN-ACK: none belongs to a connection
        outs = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, dport, flags))
        assert not reached_desktop(outs) and not crossed_bypass(outs)
        assert [o.kind for o in outs] == ["drop"]


@pytest.mark.parametrize("conntrack", [True, False])
@pytest.mark.parametrize("what", ["tcp from another port", "udp", "icmp echo", "later fragment of a reply"])
def test_unsolicited_traffic_for_a_lane_address_is_dropped_at_the_border(conntrack: bool, what: str) -> None:
    """No lane's reverse rule takes it, so it used to take NORMAL at s3: the lane MAC is never
    learned, so it was flooded to the NAT box, the DTN and the bypass."""
    topo = campus(conntrack)
    net, _ = opened(topo) if conntrack else (network(topo, DESKTOP_LANE, DTN_LANE), None)
    edge, pool = topo.edge.inside.mac, topo.lane_pool.mac
    probe = {
        "tcp from another port": from_edge(topo, "192.0.2.66", NAT_IP, 80, 22, flags=0x002),
        "udp": from_edge(topo, "192.0.2.66", NAT_IP, 53, 40000, proto="udp"),
        "icmp echo": make_packet(
            eth_src=edge,
            eth_dst=pool,
            eth_type=0x0800,
            ip_proto=1,
            ipv4_src="192.0.2.66",
            ipv4_dst=NAT_IP,
            icmpv4_type=8,
            icmpv4_code=0,
        ),
        "later fragment of a reply": make_packet(
            eth_src=edge, eth_dst=pool, eth_type=0x0800, ip_proto=6, ipv4_src=CLOUD, ipv4_dst=NAT_IP
        ),  # no L4 header
    }[what]
    outs = net.send_from_edge(probe)
    assert [o.kind for o in outs] == ["drop"], [(o.kind, o.node) for o in outs]


def test_before_any_connection_nothing_comes_back() -> None:
    topo = campus()
    net = network(topo, DESKTOP_LANE)
    outs = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 40000))
    assert [o.kind for o in outs] == ["drop"]


def test_frag_needed_for_a_lane_connection_reaches_the_desktop_with_its_own_address() -> None:
    topo = campus()
    net, sent = opened(topo)
    err = icmp_error(topo.edge.inside.mac, topo.lane_pool.mac, str(topo.edge.inside.ip.ip), NAT_IP, about=sent)
    [out] = net.send_from_edge(err)
    assert (out.kind, out.node) == ("host", "desktop")
    assert out.packet["ipv4_dst"] == DESKTOP_IP
    assert out.packet["icmp_inner"]["ipv4_src"] == DESKTOP_IP  # inner header un-NATed
    # an error about a connection nobody opened goes nowhere near the desktop
    stranger = dict(sent, tcp_src=40999)
    outs = net.send_from_edge(dict(err, icmp_inner={**err["icmp_inner"], "tcp_src": 40999}))
    assert not reached_desktop(outs), stranger


def test_dtn_one_switch_lane_is_stateful_too() -> None:
    topo = campus()
    net = network(topo, DTN_LANE)
    dtn = topo.host("dtn")
    back = ip_packet(topo.edge.inside.mac, dtn.iface.mac, CLOUD, "198.51.100.30", "tcp", 5201, 22)
    assert not any(o.kind == "host" for o in net.send_from_edge(back))  # NORMAL at most
    out = net.send_from_host(
        "dtn", ip_packet(dtn.iface.mac, topo.edge.inside.mac, "198.51.100.30", CLOUD, "tcp", 33000, 5201)
    )
    assert [(o.kind, o.packet["ipv4_src"]) for o in out] == [("edge", "198.51.100.30")]
    [back_out] = net.send_from_edge(dict(back, tcp_dst=33000))
    assert (back_out.kind, back_out.node) == ("host", "dtn")


# ---- no second door ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "who,fields",
    [
        ("server", {"ipv4_src": NAT_IP}),
        ("server", {"eth_src": "02:ff:00:00:00:01"}),
        ("server", {"eth_src": "02:ff:00:00:00:01", "ipv4_src": NAT_IP}),
        ("desktop", {"ipv4_src": NAT_IP}),
        ("dtn", {"ipv4_src": NAT_IP}),
        ("dtn", {"eth_src": "02:ff:00:00:00:01"}),
    ],
)
def test_lane_address_or_marker_from_a_host_port_is_dropped_at_once(who: str, fields: dict) -> None:
    topo = campus()
    net, _ = opened(topo)
    host = topo.host(who)
    pkt = ip_packet(host.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201)
    outs = net.send_from_host(who, {**pkt, **make_packet(**fields)})
    assert [(o.kind, o.node) for o in outs] == [("drop", host.iface.attach.switch)]


def test_the_dtn_forging_replies_never_crosses_the_bypass() -> None:
    topo = campus()
    net, _ = opened(topo)
    dtn = topo.host("dtn")
    for dst_mac in ("ff:ff:ff:ff:ff:ff", "02:00:00:01:00:10", topo.lane_pool.mac):
        for src_mac in (dtn.iface.mac, topo.edge.inside.mac):
            forged = ip_packet(src_mac, dst_mac, CLOUD, DESKTOP_IP, "tcp", 5201, 40000)
            outs = net.send_from_host("dtn", forged)
            assert not reached_desktop(outs) and not crossed_bypass(outs)


def test_a_tagged_frame_of_the_desktop_does_not_ride_the_lane() -> None:
    topo = campus()
    net, _ = opened(topo)
    desktop = topo.host("desktop")
    tagged = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201), vlan_vid=0x1000 | 10)
    assert [o.kind for o in net.send_from_host("desktop", tagged)] == ["NORMAL"]


@given(
    port=st.integers(1, 200),
    src=st.sampled_from([NAT_IP, DESKTOP_IP, CLOUD]),
    mac=st.sampled_from(["02:ff:00:00:00:01", "02:00:00:01:00:10", "02:00:00:03:00:01"]),
    switch=st.sampled_from(["s1", "s2", "s3"]),
)
@settings(max_examples=150, deadline=None)
def test_no_port_but_the_lanes_own_gets_a_packet_onto_the_bypass(port: int, src: str, mac: str, switch: str) -> None:
    """Any port of any campus switch (even ones the topology does not know), any mix of the
    lane's MAC marker, addresses and ports: only the lane's own ingress reaches the far side."""
    topo = campus()
    net, _ = opened(topo)
    # the lane's own ports: the host's, the edge's, and the inter-switch links on its path
    # (a link port is fed only by the neighbour switch's rules, which the guards protect)
    own = {("s1", 1), ("s1", 3), ("s2", 1), ("s2", 3), ("s3", 3), ("s3", 2)}
    if (switch, port) in own:
        return
    for dst in (CLOUD, DESKTOP_IP, NAT_IP):
        pkt = ip_packet(
            mac, topo.lane_pool.mac, src, dst, "tcp", 5201 if dst != CLOUD else 40000, 40000 if dst != CLOUD else 5201
        )
        outs = net.inject(PortRef(switch, port), pkt)
        assert not crossed_bypass(outs), (switch, port, pkt)
        assert not any(o.kind == "edge" and o.packet.get("ipv4_src") == NAT_IP for o in outs)


# ---- switch-side ARP ---------------------------------------------------------------------
def test_border_switch_answers_arp_for_an_active_lane_address_itself() -> None:
    topo = campus()
    net = network(topo, DESKTOP_LANE)
    req = make_packet(
        eth_src=topo.edge.inside.mac,
        eth_dst="ff:ff:ff:ff:ff:ff",
        eth_type=0x0806,
        arp_op=1,
        arp_spa="198.51.100.1",
        arp_tpa=NAT_IP,
        arp_sha=topo.edge.inside.mac,
        arp_tha="00:00:00:00:00:00",
    )
    [out] = net.send_from_edge(req)
    assert (out.kind, out.leg, out.port) == ("edge", "inside", PortRef("s3", 2))
    assert out.packet == make_packet(
        eth_src=topo.lane_pool.mac,
        eth_dst=topo.edge.inside.mac,
        eth_type=0x0806,
        arp_op=2,
        arp_spa=NAT_IP,
        arp_sha=topo.lane_pool.mac,
        arp_tpa="198.51.100.1",
        arp_tha=topo.edge.inside.mac,
    )
    # an address no lane uses is only punted (metered) to the controller
    assert [o.kind for o in net.send_from_edge(dict(req, arp_tpa="198.51.100.201"))] == ["CONTROLLER"]
    # nobody but the edge router gets the switch's answer (sent as the edge, from another
    # port, the request is the router-MAC guard's: test_macguard.py)
    nat_mac = topo.middleboxes[1].outside.mac
    assert [o.kind for o in net.inject(PortRef("s3", 1), dict(req, eth_src=nat_mac))] == ["CONTROLLER"]
    assert [o.kind for o in net.inject(PortRef("s3", 1), req)] == ["drop"]


# ---- stateless fallback ------------------------------------------------------------------
def test_stateless_fallback_refuses_inbound_syn_but_carries_replies() -> None:
    topo = campus(conntrack=False)
    net = network(topo, DESKTOP_LANE)
    compiled = compile_lane(DESKTOP_LANE, topo, NOW)
    assert not any(m.table_id for ms in compiled.values() for m in ms if hasattr(m, "table_id"))
    desktop = topo.host("desktop")
    [out] = net.send_from_host("desktop", ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201))
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP)
    syn = from_edge(topo, CLOUD, NAT_IP, 5201, 22, flags=0x002)
    assert not reached_desktop(net.send_from_edge(syn))  # no inbound connection set-up
    [back] = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 40000, flags=0x012))
    assert (back.kind, back.node, back.packet["ipv4_dst"]) == ("host", "desktop", DESKTOP_IP)
    # its stated limit: a stray ACK to another port does reach the host (which answers RST)
    assert reached_desktop(net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 22)))
    # and PMTUD: frag-needed for the lane address passes, outer header only
    err = icmp_error(topo.edge.inside.mac, topo.lane_pool.mac, "198.51.100.1", NAT_IP, about=out.packet)
    [icmp] = net.send_from_edge(err)
    assert (icmp.kind, icmp.packet["ipv4_dst"]) == ("host", DESKTOP_IP)
    assert icmp.packet["icmp_inner"]["ipv4_src"] == NAT_IP


def test_base_flows_alone_carry_nothing_to_the_bypass() -> None:
    topo = campus()
    net = Network(topo)
    net.install(compile_base(topo))
    outs = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 40000))
    assert not reached_desktop(outs)


def test_lane_addresses_are_ordinary_sources_beyond_the_edge_router() -> None:
    """Found on the real lab: a pool-source guard on s4 (edge outside <-> cloud) dropped every
    lane packet after the edge router had routed it."""
    topo = campus()
    net = network(topo, DESKTOP_LANE)
    routed = ip_packet(topo.edge.outside.mac, topo.host("cloud").iface.mac, NAT_IP, CLOUD)
    assert [o.kind for o in net.inject(topo.edge.outside.attach, routed)] == ["NORMAL"]
    marked = dict(routed, eth_src=topo.lane_pool.mac)  # the lane MAC never legitimately is
    assert [o.kind for o in net.inject(topo.edge.outside.attach, marked)] == ["drop"]


# ---- a lane-pool address handed to another host ------------------------------------------
def test_an_old_connection_never_leaves_under_another_hosts_lane_address() -> None:
    """Conntrack entries outlive their lane (no flush; established TCP lasts a day in OVS). The
    desktop's lane ends, its pool address goes to the server's lane, the desktop gets a new lane
    with another address and sends on its old connection's tuple: with one zone for every lane
    the old entry (NAT to the first address) won over the new lane's nat(), so the desktop's
    packets left under the server's lane address. Each pool address has its own zone now."""
    from viplanes.controller.compile.lane import compile_lane_removal
    from viplanes.controller.compile.shared import compile_shared_removal

    topo = campus()
    net, _ = opened(topo)
    net.install(compile_lane_removal(DESKTOP_LANE.lane_id, (1, 2, 3)))
    net.install(compile_shared_removal({3: {NAT_IP, DESKTOP_IP}, 1: {DESKTOP_IP}, 2: {DESKTOP_IP}}))
    server_lane = LaneSpec(8, "10.1.0.20", CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)
    second_ip = "198.51.100.201"
    desktop_again = LaneSpec(10, DESKTOP_IP, CLOUD, "tcp", 5201, None, second_ip, NOW + 3600)
    desired, refused = compile_desired(topo, [server_lane, desktop_again, DTN_LANE], NOW)
    assert not refused
    net.install(
        {
            # base meters exist; lanes' new-connection meters (ctlane) do not yet
            dpid: [m for m in msgs if type(m).__name__ != "OFPMeterMod" or m.meter_id not in net.tables[dpid].meters]
            for dpid, msgs in desired.items()
        }
    )
    desktop = topo.host("desktop")
    again = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201), tcp_flags=0x010)
    [out] = net.send_from_host("desktop", again)
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", second_ip)
    # a reply to the old address comes in through the server's lane (same address, so the same
    # zone, where the desktop's old entry still is): un-NATed to the desktop by that entry, no
    # live lane's mark, so dropped in table 1, not handed to NORMAL (which floods it)
    outs = net.send_from_edge(from_edge(topo, CLOUD, NAT_IP, 5201, 40000))
    assert [o.kind for o in outs] == ["drop"], [(o.kind, o.node, o.packet.get("ipv4_dst")) for o in outs]


# ---- packets conntrack finds invalid -----------------------------------------------------
@pytest.mark.parametrize("flags", [0x003, 0x001, 0x000, 0x008, 0x006, 0x012, 0x029])
def test_a_packet_conntrack_will_not_track_never_leaves_with_the_hosts_own_address(flags: int) -> None:
    """SYN+FIN, a bare FIN, no flags, PSH alone, SYN+RST, a SYN-ACK, FIN+PSH+URG: conntrack
    neither commits nor translates them, and the commit used to go straight on to the edge, so
    they left the campus with 10.1.0.10. The egress table sends on only what was translated."""
    topo = campus()
    net = network(topo, DESKTOP_LANE, DTN_LANE)
    desktop = topo.host("desktop")
    bogus = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40100, 5201), tcp_flags=flags)
    outs = net.send_from_host("desktop", bogus)
    assert [o.kind for o in outs] == ["drop"], [(o.kind, o.packet.get("ipv4_src")) for o in outs]
    # the lane itself still works: a SYN leaves translated
    syn = dict(bogus, tcp_flags=0x002)
    assert [(o.kind, o.packet["ipv4_src"]) for o in net.send_from_host("desktop", syn)] == [("edge", NAT_IP)]
