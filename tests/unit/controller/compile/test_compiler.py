"""The lane compiler, checked by what packets do in the simulated campus, not by message text."""

from __future__ import annotations

import dataclasses

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import T0 as NOW  # the compile tests' now
from tests.support.flowsim import ip_packet, make_packet
from tests.support.netsim import Network
from viplanes.controller.compile import ctlane, macguard, ndguard
from viplanes.controller.compile.bands import PRIORITY_PROBE, PRIORITY_PROBE_DROP
from viplanes.controller.compile.lane import (
    ARP_PUNT_METER,
    PRIORITY_ARP_PROXY,
    PRIORITY_BYPASS_DROP,
    PRIORITY_CT_EGRESS,
    PRIORITY_CT_POOL_DROP,
    PRIORITY_GUARD,
    PRIORITY_LANE,
    PRIORITY_POOL_DROP,
    PRIORITY_RELATED,
    PRIORITY_TABLE_MISS,
    LaneCompileError,
    NoLanePath,
    compile_base,
    compile_lane,
    compile_lane_removal,
    hard_timeout_for,
    lane_cookie,
    lane_dpids,
    lane_ingress_ports,
)
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import PortRef, Topology

NAT_IP = "198.51.100.200"
CLOUD = "203.0.113.10"


def desktop_packet(topo: Topology, **change: object) -> dict:
    desktop = topo.host("desktop")
    fw_mac = topo.middleboxes[0].inside.mac  # the desktop's gateway
    pkt = ip_packet(desktop.iface.mac, fw_mac, "10.1.0.10", CLOUD, "tcp", 40000, 5201)
    pkt.update(make_packet(**change))
    return pkt


def reply_packet(topo: Topology, dst_ip: str = NAT_IP, **change: object) -> dict:
    pkt = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, dst_ip, "tcp", 5201, 40000)
    pkt.update(make_packet(**change))
    return pkt


def only(outcomes: list) -> object:
    assert len(outcomes) == 1, outcomes
    return outcomes[0]


def test_lane_packet_leaves_on_bypass_to_edge_with_lane_source(net: Network, topo: Topology) -> None:
    out = only(net.send_from_host("desktop", desktop_packet(topo)))
    assert (out.kind, out.leg, out.port) == ("edge", "inside", PortRef("s3", 2))
    assert out.left_by("s2", 3)  # over the bypass link, never via the firewall port s2:2
    assert out.packet["ipv4_src"] == NAT_IP
    assert out.packet["eth_src"] == topo.lane_pool.mac
    assert out.packet["eth_dst"] == topo.edge.inside.mac
    assert (out.packet["ipv4_dst"], out.packet["tcp_dst"], out.packet["tcp_src"]) == (CLOUD, 5201, 40000)


def test_return_traffic_is_translated_back_to_the_desktop(net: Network, topo: Topology) -> None:
    net.send_from_host("desktop", desktop_packet(topo))  # the lane's own connection
    out = only(net.send_from_edge(reply_packet(topo)))
    assert (out.kind, out.node, out.port) == ("host", "desktop", PortRef("s1", 1))
    assert out.packet["ipv4_dst"] == "10.1.0.10"
    assert out.packet["ipv4_src"] == CLOUD
    assert out.packet["eth_src"] == topo.middleboxes[0].inside.mac  # looks like its gateway
    assert out.packet["eth_dst"] == topo.host("desktop").iface.mac


@pytest.mark.parametrize(
    "change",
    [
        {"eth_src": "02:00:00:01:00:99"},  # another MAC on the desktop's port
        {"ipv4_src": "10.1.0.11"},  # another source address
        {"tcp_dst": 5202},  # a different destination port
        {"ipv4_dst": "203.0.113.11"},  # a different destination
    ],
)
def test_deviating_packet_takes_the_default_path(net: Network, topo: Topology, change: dict) -> None:
    out = only(net.send_from_host("desktop", desktop_packet(topo, **change)))
    assert (out.kind, out.node) == ("NORMAL", "s1")
    assert out.packet == desktop_packet(topo, **change)  # untouched


def test_same_protocol_numbers_over_udp_do_not_match(net: Network, topo: Topology) -> None:
    desktop = topo.host("desktop")
    pkt = ip_packet(desktop.iface.mac, "02:00:00:02:00:01", "10.1.0.10", CLOUD, "udp", 40000, 5201)
    assert only(net.send_from_host("desktop", pkt)).kind == "NORMAL"


def test_spoofer_on_another_port_gets_no_lane(net: Network, topo: Topology) -> None:
    # the server's port sends the desktop's exact packet (MAC and IP spoofed): the host source
    # guard drops it at once (a lane source is a source only on its own port)
    out = only(net.send_from_host("server", desktop_packet(topo)))
    assert (out.kind, out.node) == ("drop", "s1")


def test_unmatched_packet_on_bypass_port_is_dropped(net: Network, topo: Topology) -> None:
    for at in (PortRef("s3", 3), PortRef("s2", 3)):
        out = only(net.inject(at, desktop_packet(topo, tcp_dst=22)))
        assert (out.kind, out.port) == ("drop", at)
    # return traffic for a port the lane does not carry does not enter the bypass either: it is
    # dropped at the border (a lane address takes nothing but its lanes' replies)
    out = only(net.send_from_edge(reply_packet(topo, tcp_src=80)))
    assert (out.kind, out.port) == ("drop", topo.edge.inside.attach)


def test_dtn_lane_needs_no_nat(topo: Topology) -> None:
    dtn = topo.host("dtn")
    lane = LaneSpec(3, str(dtn.iface.ip.ip), CLOUD, "udp", 9000, None, None, NOW + 60)
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(compile_lane(lane, topo, NOW))
    pkt = ip_packet(dtn.iface.mac, topo.edge.inside.mac, str(dtn.iface.ip.ip), CLOUD, "udp", 5000, 9000)
    out = only(net.send_from_host("dtn", pkt))
    assert (out.kind, out.leg) == ("edge", "inside")
    assert out.packet == pkt  # nothing rewritten: the DTN is routable and already talks to the edge
    back = ip_packet(topo.edge.inside.mac, dtn.iface.mac, CLOUD, str(dtn.iface.ip.ip), "udp", 9000, 5000)
    out = only(net.send_from_edge(back))
    assert (out.kind, out.node, out.packet["ipv4_dst"]) == ("host", "dtn", str(dtn.iface.ip.ip))


def test_pinned_source_port(topo: Topology, lane: LaneSpec) -> None:
    pinned = dataclasses.replace(lane, src_port=40000)
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(compile_lane(pinned, topo, NOW))
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "edge"
    assert only(net.send_from_host("desktop", desktop_packet(topo, tcp_src=40001))).kind == "NORMAL"
    assert only(net.send_from_edge(reply_packet(topo))).kind == "host"
    assert only(net.send_from_edge(reply_packet(topo, tcp_dst=40001))).kind == "drop"
    flows = [m for msgs in compile_lane(pinned, topo, NOW).values() for m in msgs if isinstance(m, parser.OFPFlowMod)]
    assert {m.priority for m in flows if m.table_id == 0} == {PRIORITY_LANE + 1}


def test_removal_deletes_only_that_lane(net: Network, topo: Topology, lane: LaneSpec) -> None:
    server_lane = LaneSpec(8, "10.1.0.20", CLOUD, "tcp", 5201, None, "198.51.100.201", NOW + 60)
    net.install(compile_lane(server_lane, topo, NOW))
    base_counts = {d: len(t.flows) for d, t in net.tables.items()}
    net.install(compile_lane_removal(lane.lane_id, lane_dpids(lane, topo)))
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "NORMAL"
    server = topo.host("server")
    pkt = ip_packet(server.iface.mac, "02:00:00:02:00:01", "10.1.0.20", CLOUD, "tcp", 40000, 5201)
    out = only(net.send_from_host("server", pkt))
    assert (out.kind, out.packet["ipv4_src"]) == ("edge", "198.51.100.201")
    for dpid, table in net.tables.items():
        assert all(f.cookie != lane_cookie(lane.lane_id) for f in table.flows)
        assert len(table.flows) == base_counts[dpid] - {1: 2, 2: 2, 3: 6}.get(dpid, 0)  # border: + 2 commit flows


def test_base_flows(topo: Topology) -> None:
    # the ND and router-MAC guards' flows (850-895) are test_ndguard's and test_macguard's
    nd = range(ndguard.PRIORITY_RA_DROP, macguard.PRIORITY_MAC_GUARD + 1)
    base = {
        dpid: [m for m in msgs if not (isinstance(m, parser.OFPFlowMod) and m.priority in nd)]
        for dpid, msgs in compile_base(topo).items()
    }
    assert set(base) == {1, 2, 3, 4}
    for ofmsgs in base.values():
        assert ofmsgs[0].priority == PRIORITY_TABLE_MISS and not ofmsgs[0].match.items()
    guards = [PRIORITY_GUARD] * (4 + 3 * 2)  # marker, pool (IPv4, ARP x2); 3 hosts (IPv4, ARP) at fw
    probes = [PRIORITY_PROBE, PRIORITY_PROBE, PRIORITY_PROBE_DROP]  # s2's two link ports, the rest
    assert [m.priority for m in base[2]] == [PRIORITY_TABLE_MISS, PRIORITY_BYPASS_DROP, *guards, *probes]
    s3_guards = [PRIORITY_GUARD] * (4 + (3 + 3 + 2) * 2)  # nat, edge: 3 hosts; dtn: 2 (IPv4, ARP)
    assert [(getattr(m, "table_id", None), getattr(m, "priority", None)) for m in base[3]] == [
        (0, PRIORITY_TABLE_MISS),
        (0, PRIORITY_BYPASS_DROP),
        *[(0, p) for p in s3_guards],
        (None, None),
        (0, PRIORITY_ARP_PROXY),
        (0, PRIORITY_POOL_DROP),
        (0, PRIORITY_RELATED),
        (0, PRIORITY_RELATED),
        (1, PRIORITY_CT_POOL_DROP),
        (1, PRIORITY_CT_POOL_DROP),
        (1, PRIORITY_TABLE_MISS),
        (2, PRIORITY_CT_EGRESS),
        (2, PRIORITY_TABLE_MISS),
        (3, PRIORITY_TABLE_MISS),
        (0, PRIORITY_PROBE),
        (0, PRIORITY_PROBE_DROP),
    ]
    net = Network(topo)
    net.install(base)
    # default traffic is the switch's NORMAL forwarding
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "NORMAL"
    # ARP for a lane-pool address goes to the controller; other ARP is normal
    arp = make_packet(
        eth_src=topo.edge.inside.mac,
        eth_dst="ff:ff:ff:ff:ff:ff",
        eth_type=0x0806,
        arp_op=1,
        arp_spa="198.51.100.1",
        arp_tpa=NAT_IP,
    )
    assert only(net.send_from_edge(arp)).kind == "CONTROLLER"
    assert only(net.send_from_edge(dict(arp, arp_tpa="198.51.100.2"))).kind == "NORMAL"
    assert only(net.send_from_edge(dict(arp, arp_op=2))).kind == "NORMAL"


def test_flow_attributes(topo: Topology, lane: LaneSpec) -> None:
    for ofmsgs in compile_lane(lane, topo, NOW).values():
        for msg in ofmsgs:
            assert msg.datapath is None
            if isinstance(msg, parser.OFPMeterMod):  # the border's new-connection meter (ctlane)
                continue
            assert msg.cookie == lane_cookie(7)
            assert msg.flags == ofp.OFPFF_SEND_FLOW_REM
            assert (msg.idle_timeout, msg.hard_timeout) == (0, 3600)


def test_hard_timeout_capped_and_expiry(topo: Topology, lane: LaneSpec) -> None:
    assert hard_timeout_for(NOW + 10 * 86400, NOW) == 65535
    assert hard_timeout_for(NOW + 0.2, NOW) == 1
    assert hard_timeout_for(NOW + 99.1, NOW) == 100
    assert hard_timeout_for(float("inf"), NOW) == 65535
    with pytest.raises(ValueError):
        hard_timeout_for(float("nan"), NOW)
    long_lane = dataclasses.replace(lane, expires_at=NOW + 200_000)
    flows = [m for ms in compile_lane(long_lane, topo, NOW).values() for m in ms if isinstance(m, parser.OFPFlowMod)]
    assert {m.hard_timeout for m in flows} == {65535}
    with pytest.raises(ValueError, match="expired"):
        compile_lane(dataclasses.replace(lane, expires_at=NOW - 1), topo, NOW)
    # the switch drops the lane by itself when the timeout passes (controller away)
    net = Network(topo)
    net.install(compile_base(topo), now=NOW)
    net.install(compile_lane(lane, topo, NOW), now=NOW)
    net.expire(NOW + 3599)
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "edge"
    net.expire(NOW + 3600)
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "NORMAL"


def test_rate_cap_meter(topo: Topology, lane: LaneSpec) -> None:
    capped = dataclasses.replace(lane, rate_mbps=50)
    ofmsgs = compile_lane(capped, topo, NOW)
    for dpid in (1, 3):  # both ingress switches
        meter = ofmsgs[dpid][0]
        assert isinstance(meter, parser.OFPMeterMod)  # meters come before the flows using them
        assert (meter.command, meter.flags, meter.bands[0].rate) == (ofp.OFPMC_ADD, ofp.OFPMF_KBPS, 50_000)
        newconn = [m.meter_id for m in ofmsgs[dpid][1:] if isinstance(m, parser.OFPMeterMod)]
        assert newconn == ([ctlane.newconn_meter_id(7)] if dpid == 3 else [])  # the border's (ctlane)
    assert not any(isinstance(m, parser.OFPMeterMod) for m in ofmsgs[2])
    metered = [
        m
        for ms in ofmsgs.values()
        for m in ms
        if isinstance(m, parser.OFPFlowMod) and any(isinstance(i, parser.OFPInstructionMeter) for i in m.instructions)
    ]
    rate_metered = [m for m in metered if ctlane.newconn_meter_id(7) not in {i.meter_id for i in m.instructions[:1]}]
    assert sorted(m.match["in_port"] for m in rate_metered) == [1, 2]  # host port and edge port only
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(ofmsgs)  # the simulator refuses a meter instruction without its meter
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "edge"
    net.install(compile_lane_removal(7, lane_dpids(capped, topo), newconn_at=3))
    assert all(set(t.meters) <= {ARP_PUNT_METER} for t in net.tables.values())
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "NORMAL"
    refresh = compile_lane(capped, topo, NOW, meter_command=ofp.OFPMC_MODIFY)
    assert refresh[1][0].command == ofp.OFPMC_MODIFY


@pytest.mark.parametrize(
    "change,words",
    [
        ({"src_ip": "10.1.0.99"}, "is no host"),
        ({"src_ip": "not-an-ip"}, "is no host"),
        ({"nat_ip": None}, "needs a nat_ip"),
        ({"nat_ip": "192.0.2.5"}, "not in the lane pool"),
        ({"protocol": "icmp"}, "not tcp or udp"),
        ({"dst_port": 0}, "dst_port"),
        ({"src_port": 70000}, "src_port"),
        ({"dst_ip": "cloud"}, "dst_ip"),
        ({"dst_ip": "198.51.100.30"}, "inside the campus"),  # the DTN
        ({"dst_ip": "10.1.0.20"}, "inside the campus"),  # a NAT'd host
        ({"dst_ip": "10.2.0.2"}, "inside the campus"),  # between firewall and NAT
        ({"dst_ip": "224.0.0.5"}, "not a unicast"),
        ({"lane_id": 0}, "lane id"),
    ],
)
def test_bad_lanes_are_refused(topo: Topology, lane: LaneSpec, change: dict, words: str) -> None:
    # the set view follows the single fields only when it is cleared (replace keeps it)
    change = {
        **change,
        **({"dst_nets": ()} if "dst_ip" in change else {}),
        **({"dst_ports": ()} if "dst_port" in change else {}),
    }
    with pytest.raises(ValueError, match=words):
        compile_lane(dataclasses.replace(lane, **change), topo, NOW)


def test_cloud_source_has_no_lane(topo: Topology, lane: LaneSpec) -> None:
    with pytest.raises(NoLanePath):
        compile_lane(dataclasses.replace(lane, src_ip=CLOUD, dst_ip="192.0.2.50", dst_nets=(), nat_ip=None), topo, NOW)
    assert issubclass(NoLanePath, ValueError) and issubclass(LaneCompileError, ValueError)


def test_ingress_ports_and_dpids(topo: Topology, lane: LaneSpec) -> None:
    assert lane_dpids(lane, topo) == (1, 2, 3)
    assert lane_ingress_ports(lane, topo) == {(1, 1), (3, 2)}
    net = Network(topo)
    net.install(compile_base(topo))
    net.install(compile_lane(lane, topo, NOW))
    net.send_from_host("desktop", desktop_packet(topo))
    net.send_from_edge(reply_packet(topo))
    net.send_from_edge(reply_packet(topo))
    counted = {
        (d, f.match["in_port"]): f.packet_count
        for d, t in net.tables.items()
        for f in t.flows
        if f.cookie == lane_cookie(7) and f.table_id == 0
    }
    assert sum(counted[k] for k in lane_ingress_ports(lane, topo)) == 3


def test_desired_state_and_a_reconcile_by_flow_key(topo: Topology, lane: LaneSpec) -> None:
    """What reconcile does with these pieces: the switch ends exactly at the desired flows,
    identical flows keep their counters (they were not re-sent)."""
    from viplanes.controller.compile.cookies import ALL_APP_FLOWS
    from viplanes.controller.compile.flowkey import flow_key_of
    from viplanes.controller.compile.lane import compile_desired, compile_flow_delete

    server_lane = LaneSpec(8, "10.1.0.20", CLOUD, "tcp", 5201, None, "198.51.100.201", NOW + 60)
    dtn_lane = LaneSpec(9, "198.51.100.30", CLOUD, "udp", 9000, None, None, NOW + 60)
    expired = dataclasses.replace(dtn_lane, lane_id=10, expires_at=NOW - 5)
    net = Network(topo)
    before, _ = compile_desired(topo, [lane, server_lane], NOW)
    net.install(before)
    net.send_from_host("desktop", desktop_packet(topo))  # counts on the desktop lane
    foreign = parser.OFPFlowMod(None, cookie=0x42, priority=5, match=parser.OFPMatch(in_port=9), instructions=[])
    net.install({1: [foreign]})  # someone else's flow: must survive

    desired, refused = compile_desired(topo, [lane, dtn_lane, expired], NOW + 10)
    assert list(refused) == [10] and "expired" in refused[10]
    for dpid, table in net.tables.items():
        want = {flow_key_of(m): m for m in desired.get(dpid, []) if isinstance(m, parser.OFPFlowMod)}
        have = {flow_key_of(s): s for s in table.stats(*ALL_APP_FLOWS)}
        table.apply_all([compile_flow_delete(have[k]) for k in have.keys() - want.keys()])
        meters = [
            m for m in desired.get(dpid, []) if isinstance(m, parser.OFPMeterMod) and m.meter_id not in table.meters
        ]
        table.apply_all([*meters, *(want[k] for k in want.keys() - have.keys())])
        assert {flow_key_of(s) for s in table.stats(*ALL_APP_FLOWS)} == set(want)
    assert any(f.cookie == 0x42 for f in net.table("s1").flows)
    desktop_ingress = [f for f in net.table("s1").flows if f.cookie == lane_cookie(7) and f.match["in_port"] == 1]
    assert desktop_ingress[0].packet_count == 1  # untouched, not re-installed
    assert only(net.send_from_host("desktop", desktop_packet(topo))).kind == "edge"
    server = topo.host("server")
    pkt = ip_packet(server.iface.mac, "02:00:00:02:00:01", "10.1.0.20", CLOUD, "tcp", 40000, 5201)
    assert only(net.send_from_host("server", pkt)).kind == "NORMAL"


def test_compile_desired_leaves_the_garbage_collector_as_it_found_it(topo: Topology, lane: LaneSpec) -> None:
    import gc

    from viplanes.controller.compile.lane import compile_desired

    assert gc.isenabled()
    compile_desired(topo, [lane, dataclasses.replace(lane, lane_id=8, expires_at=NOW - 1)], NOW)
    assert gc.isenabled()
    gc.disable()
    try:
        compile_desired(topo, [lane], NOW)
        assert not gc.isenabled()  # an application that runs without it keeps it off
    finally:
        gc.enable()
