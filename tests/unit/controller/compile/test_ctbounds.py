"""What one lane can take from the others at a conntrack border (issue 28, item 3), asked of the
simulated campus (flowsim + ctsim): zones per lane address, the new-connection meter on ``+new``,
the flush of a pool address's zone, and the zone limits the runtime sets (ctlimits)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import icmp6_error, icmp_error, ip6_packet, ip_packet
from tests.support.netsim import Network
from tests.support.paths import REPO
from viplanes.controller.compile.cookies import lane_cookie as cookie
from viplanes.controller.compile.lane import compile_desired, compile_lane_removal
from viplanes.controller.compile.shared import compile_shared_removal
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

NOW = 1_700_000_000.0
NAT_IP, CLOUD, DESKTOP_IP, DTN_IP = "198.51.100.200", "203.0.113.10", "10.1.0.10", "198.51.100.30"
DESKTOP6, DTN6, CLOUD6 = "2001:db8:1::10", "2001:db8:3::30", "2001:db8:ff::10"
FW_MAC = "02:00:00:02:00:01"
SYN, SYN_ACK = 0x002, 0x012


def v6_lane(lane_id: int, src_ip: str) -> LaneSpec:
    return LaneSpec(
        lane_id=lane_id,
        src_ip=src_ip,
        dst_ip=None,
        protocol="tcp",
        dst_port=None,
        src_port=None,
        nat_ip=None,
        expires_at=NOW + 3600,
        dst_nets=(f"{CLOUD6}/128",),
        dst_ports=((5201, 5201),),
    )


def network(topo: Topology, *lanes: LaneSpec) -> Network:
    net = Network(topo)
    desired, refused = compile_desired(topo, lanes, NOW)
    assert not refused
    net.install(desired)
    return net


def border_ct(net: Network) -> Any:
    return net.tables[3].conntrack


def syn6(topo: Topology, host: str, src: str, sport: int) -> dict:
    gw = FW_MAC if host == "desktop" else topo.edge.inside.mac
    return dict(ip6_packet(topo.host(host).iface.mac, gw, src, CLOUD6, "tcp", sport, 5201), tcp_flags=SYN)


def synack6(topo: Topology, host: str, dst: str, dport: int) -> dict:
    pkt = ip6_packet(topo.edge.inside.mac, topo.host(host).iface.mac, CLOUD6, dst, "tcp", 5201, dport)
    return dict(pkt, tcp_flags=SYN_ACK)


# ---- zones: one host's full zone is no other host's ------------------------------------------
def test_a_host_that_fills_its_zone_does_not_stop_another_hosts_untranslated_lane() -> None:
    """The attack: the desktop's v6 lane opens connections until its zone is at its limit. Before,
    every untranslated lane committed in one zone (CT_ZONE): the DTN's lane then could not
    commit, and its SYN-ACK never came back to it."""
    topo = load_topology(REPO / "topologies" / "campus-dualstack.yaml")
    net = network(topo, v6_lane(7, DESKTOP_IP), v6_lane(9, DTN_IP))
    ct = border_ct(net)
    for sport in range(40000, 40010):
        [out] = net.send_from_host("desktop", syn6(topo, "desktop", DESKTOP6, sport))
        assert out.kind == "edge"
    [flooded] = {c.zone for c in ct.connections}
    ct.limits[flooded] = ct.count(flooded)  # the desktop's zone is full
    [out] = net.send_from_host("desktop", syn6(topo, "desktop", DESKTOP6, 40010))
    assert ct.count(flooded) == 10  # nothing more there
    [out] = net.send_from_host("dtn", syn6(topo, "dtn", DTN6, 33000))
    assert out.kind == "edge"
    back = net.send_from_edge(synack6(topo, "dtn", DTN6, 33000))
    assert [(o.kind, o.node) for o in back] == [("host", "dtn")], back


def test_related_icmp_errors_still_reach_untranslated_hosts_in_their_own_zones() -> None:
    """Path MTU discovery keeps working: errors for a host's own v4 / v6 address are looked up in
    its zone (shared per-address flows), not in the zone no lane commits in any more."""
    topo = load_topology(REPO / "topologies" / "campus-dualstack.yaml")
    v4 = LaneSpec(9, DTN_IP, CLOUD, "tcp", 5201, None, None, NOW + 3600)
    net = network(topo, v4, v6_lane(7, DESKTOP_IP))
    dtn, edge = topo.host("dtn"), topo.edge.inside
    sent4 = ip_packet(dtn.iface.mac, edge.mac, DTN_IP, CLOUD, "tcp", 33000, 5201)
    assert [o.kind for o in net.send_from_host("dtn", dict(sent4, tcp_flags=SYN))] == ["edge"]
    err4 = icmp_error(edge.mac, dtn.iface.mac, str(edge.ip.ip), DTN_IP, about=sent4)
    assert [(o.kind, o.node) for o in net.send_from_edge(err4)] == [("host", "dtn")]
    sent6 = syn6(topo, "desktop", DESKTOP6, 40000)
    assert [o.kind for o in net.send_from_host("desktop", sent6)] == ["edge"]
    err6 = icmp6_error(edge.mac, topo.lane_pool.mac, "2001:db8:3::1", DESKTOP6, about=sent6)
    assert [(o.kind, o.node) for o in net.send_from_edge(err6)] == [("host", "desktop")]


# ---- the new-connection meter ----------------------------------------------------------------
def lane_meters_at_border(net: Network) -> set[int]:
    return {
        i.meter_id
        for e in net.tables[3].flows
        if e.cookie >> 32 == 0x56500000
        for i in e.instructions
        if isinstance(i, parser.OFPInstructionMeter)
    }


def test_syns_beyond_the_lanes_new_connection_rate_take_no_table_entry() -> None:
    """The attack: SYNs as fast as the desktop can send. Once its new-connection meter has no
    tokens left the switch drops them before the commit (no entry), while its open connection
    goes on unmetered. Before, the border had no meter for a lane without a rate cap: each SYN
    became an entry."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    desktop_lane = LaneSpec(7, DESKTOP_IP, CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)
    net = network(topo, desktop_lane)
    desktop = topo.host("desktop")
    first = ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", 40000, 5201)
    [out] = net.send_from_host("desktop", dict(first, tcp_flags=SYN))
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP)
    synack = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, NAT_IP, "tcp", 5201, 40000)
    assert [o.node for o in net.send_from_edge(dict(synack, tcp_flags=SYN_ACK))] == ["desktop"]
    net.tables[3].exhausted = lane_meters_at_border(net)  # the flood used every token
    ct = border_ct(net)
    before = len(ct.connections)
    for sport in range(40001, 40100):
        outs = net.send_from_host("desktop", dict(first, tcp_src=sport, tcp_flags=SYN))
        assert [(o.kind, o.node) for o in outs] == [("drop", "s3")]
    assert len(ct.connections) == before
    [out] = net.send_from_host("desktop", first)  # the open connection: an ACK, unmetered
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP)


def test_a_one_way_udp_stream_passes_its_lane_once_its_first_datagram_is_committed() -> None:
    """Issue 42: a UDP flow that never gets a reply stays ``+new`` at the border. Before, every
    one of its datagrams met the lane's new-connection meter (100/s: 897 of 8,000 delivered in
    8 s on the lab); the meter now counts connections: a datagram whose lookup finds the lane's
    own entry (ct_mark = lane id) is committed unmetered, while a datagram that would open a new
    connection (another source port) still meets the spent meter and takes no entry."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    net = network(topo, LaneSpec(7, DESKTOP_IP, CLOUD, "udp", 5202, None, NAT_IP, NOW + 3600))
    desktop = topo.host("desktop")
    datagram = ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "udp", 40000, 5202)
    [out] = net.send_from_host("desktop", datagram)
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP)
    net.tables[3].exhausted = lane_meters_at_border(net)  # the meter has no token left
    ct = border_ct(net)
    for _ in range(50):  # no reply ever: each datagram is still +new, with the lane's mark
        [out] = net.send_from_host("desktop", datagram)
        assert (out.kind, out.packet["ipv4_src"]) == ("edge", NAT_IP), out
    assert len(ct.connections) == 1 and not ct.connections[0].replied
    for sport in range(40001, 40050):  # a one-datagram-per-port flood: still metered, no entry
        outs = net.send_from_host("desktop", dict(datagram, udp_src=sport))
        assert [(o.kind, o.node) for o in outs] == [("drop", "s3")]
    assert len(ct.connections) == 1


def test_the_meter_bypass_needs_the_lanes_own_entry_not_any_mark() -> None:
    """The unmetered ``+new`` path is for packets whose lookup found an entry (every commit marks
    it with a lane id); a packet with no entry has ct_mark 0 and is metered, whatever its
    tuple. The metered flow sits above the unmetered one, so no ordering accident skips it."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    desired, _ = compile_desired(topo, [LaneSpec(7, DESKTOP_IP, CLOUD, "udp", 5202, None, NAT_IP, NOW + 3600)], NOW)
    commits = [m for m in desired[3] if isinstance(m, parser.OFPFlowMod) and m.table_id == 3 and m.cookie == cookie(7)]
    metered = [m for m in commits if any(isinstance(i, parser.OFPInstructionMeter) for i in m.instructions)]
    plain = [m for m in commits if m not in metered]
    assert len(metered) == len(plain) == 1
    assert dict(metered[0].match.items())["ct_mark"] == 0
    assert metered[0].priority > plain[0].priority


def test_the_new_connection_meter_is_the_lanes_own_and_follows_the_topology() -> None:
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    border = topo.switch("s3")
    slow = dataclasses.replace(
        topo, switches=tuple(dataclasses.replace(s, ct_new_per_s=7) if s is border else s for s in topo.switches)
    )
    lane7 = LaneSpec(7, DESKTOP_IP, CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)
    lane8 = dataclasses.replace(lane7, lane_id=8, dst_port=5202)
    desired, _ = compile_desired(slow, [lane7, lane8], NOW)
    meters = {m.meter_id: m for m in desired[3] if isinstance(m, parser.OFPMeterMod)}
    news = {k: v for k, v in meters.items() if 0x80000000 <= k < 0xFFFF0000}  # not the ARP punt's
    assert sorted(news) == [0x80000007, 0x80000008]
    assert all(m.bands[0].rate == 7 for m in news.values())


# ---- zone reuse ------------------------------------------------------------------------------
def test_a_pool_addresss_zone_is_emptied_when_its_last_lane_ends() -> None:
    """The attack: a lane holder leaves entries behind (an established TCP entry lives a day) so
    that the next holder of its pool address starts with a full zone. The removal of the
    address's last lane flushes its zone on the border."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    desktop_lane = LaneSpec(7, DESKTOP_IP, CLOUD, "tcp", 5201, None, NAT_IP, NOW + 3600)
    net = network(topo, desktop_lane)
    desktop = topo.host("desktop")
    for sport in range(40000, 40005):
        syn = dict(ip_packet(desktop.iface.mac, FW_MAC, DESKTOP_IP, CLOUD, "tcp", sport, 5201), tcp_flags=SYN)
        net.send_from_host("desktop", syn)
    ct = border_ct(net)
    assert len(ct.connections) == 5
    net.install(compile_lane_removal(7, (1, 2, 3)))
    net.install(compile_shared_removal({3: {NAT_IP, DESKTOP_IP}, 1: {DESKTOP_IP}, 2: {DESKTOP_IP}}, topo))
    assert ct.connections == []


# ---- zone limits: switch configuration (ctlimits) --------------------------------------------
def test_zone_limits_cover_every_lane_zone_and_say_so_where_they_cannot_be_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from viplanes.controller.compile.ctlane import zone_layout
    from viplanes.controller.runtime import ctlimits

    shipped = load_topology(REPO / "topologies" / "campus.yaml")
    topo = dataclasses.replace(  # a border the controller cannot reach (the shipped lab's can)
        shipped,
        switches=tuple(dataclasses.replace(s, ct_appctl="") for s in shipped.switches),
    )
    with caplog.at_level(logging.WARNING):
        assert "ct_appctl not set" in (ctlimits.apply_zone_limits(topo, 3) or "")
    assert "no per-zone conntrack limit" in caplog.text
    assert ctlimits.apply_zone_limits(topo, 1) is None  # not the border: nothing to do
    border = topo.switch("s3")
    local = dataclasses.replace(
        topo,
        switches=tuple(
            dataclasses.replace(s, ct_appctl="ovs-vswitchd netdev@ovs-netdev", ct_zone_limit=500) if s is border else s
            for s in topo.switches
        ),
    )
    calls: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def run(argv: list[str], **_: Any) -> Done:
        calls.append(argv)
        return Done()

    assert ctlimits.apply_zone_limits(local, 3, run=run) is None
    args = [a for argv in calls for a in argv]
    assert calls[0][:6] == [
        "ovs-appctl",
        "-t",
        "ovs-vswitchd",
        "--timeout=10",
        "dpctl/ct-set-limits",
        "netdev@ovs-netdev",
    ]
    layout = zone_layout(topo)
    for addr in topo.lane_addresses():
        assert f"zone={layout.nat(str(addr))},limit=500" in args
    for i, _host in enumerate(topo.hosts):
        assert f"zone={layout.host(i)},limit=500" in args

    class Failed(Done):
        returncode, stderr = 2, "ovs-vswitchd: datapath not found"

    assert "datapath not found" in (ctlimits.apply_zone_limits(local, 3, run=lambda argv, **_: Failed()) or "")


def test_the_topology_refuses_nonsense_bounds(tmp_path: Any) -> None:
    from viplanes.topologies.loader import TopologyError

    text = (REPO / "topologies" / "campus.yaml").read_text()
    bad = text.replace("{name: s3, dpid: 3, role: border", "{name: s3, dpid: 3, role: border, ct_new_per_s: 0")
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    with pytest.raises(TopologyError, match="ct_new_per_s"):
        load_topology(path)
