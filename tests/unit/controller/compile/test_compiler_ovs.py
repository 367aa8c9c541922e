"""The compiler against a real Open vSwitch (userspace bridge, no Mininet, no os-ken app).

A raw OpenFlow 1.3 connection sends the compiled bytes exactly as built; the switch must accept
them (barrier, no error), report them back so that ``flow_key`` of the stats equals ``flow_key``
of what we sent (what reconcile relies on), delete only one lane by cookie, and forward packets
the way ``flowsim`` predicts (checked with ``ofproto/trace``: same rule, same outputs, same
rewritten fields). Marked integration: needs root and a running ovs-vswitchd.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import FlowTable, ip_packet, make_packet
from tests.support.paths import REPO
from tests.support.rawof import RawOpenFlow, install
from viplanes.controller.compile.flowkey import flow_key_of
from viplanes.controller.compile.lane import (
    ALL_APP_FLOWS,
    compile_base,
    compile_lane,
    compile_lane_removal,
    flow_key,
)
from viplanes.controller.compile.shared import compile_shared
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology

pytestmark = pytest.mark.integration
CAMPUS = load_topology(REPO / "topologies" / "campus.yaml")
NOW = 1000.0
DESKTOP = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.200", NOW + 600, rate_mbps=40)
DTN = LaneSpec(9, "198.51.100.30", "203.0.113.10", "udp", 9000, 5000, None, NOW + 600)


def test_switch_accepts_echoes_and_deletes_by_cookie(bridge: tuple[str, RawOpenFlow]) -> None:
    _, conn = bridge
    dpid = 3  # s3: edge port, bypass port, both lanes, the ARP punt
    base, desktop, dtn = (
        compile_base(CAMPUS)[dpid],
        compile_lane(DESKTOP, CAMPUS, NOW)[dpid],
        compile_lane(DTN, CAMPUS, NOW)[dpid],
    )
    base += compile_shared(CAMPUS, [DESKTOP, DTN])[dpid]  # the switch-side ARP reply
    install(conn, base + desktop + dtn)
    sent = {flow_key_of(m) for m in base + desktop + dtn if isinstance(m, parser.OFPFlowMod)}
    got = {flow_key(s.priority, s.cookie, s.match, s.instructions, s.table_id) for s in conn.flow_stats(*ALL_APP_FLOWS)}
    assert got == sent
    # deleting the DTN lane (it has no meter: deleting an unknown meter must not be an error)
    install(conn, compile_lane_removal(DTN.lane_id, [dpid])[dpid])
    left = {flow_key_of(s) for s in conn.flow_stats(*ALL_APP_FLOWS)}
    assert left == {flow_key_of(m) for m in base + desktop if isinstance(m, parser.OFPFlowMod)}
    install(conn, compile_lane_removal(DESKTOP.lane_id, [dpid])[dpid])
    assert {flow_key_of(s) for s in conn.flow_stats(*ALL_APP_FLOWS)} == {
        flow_key_of(m) for m in base if isinstance(m, parser.OFPFlowMod)
    }


# ---- forwarding, traced -----------------------------------------------------------------
# our field -> how `ofproto/trace` prints it in "Final flow" (it takes the OXM names as input)
TRACE_NAMES = {
    "eth_src": "dl_src",
    "eth_dst": "dl_dst",
    "ipv4_src": "nw_src",
    "ipv4_dst": "nw_dst",
    "tcp_src": "tp_src",
    "tcp_dst": "tp_dst",
    "udp_src": "tp_src",
    "udp_dst": "tp_dst",
    "arp_op": "arp_op",
    "arp_spa": "arp_spa",
    "arp_tpa": "arp_tpa",
}


def trace(bridge_name: str, pkt: dict[str, Any], in_port: int) -> tuple[str, list[Any], dict]:
    """(rule that matched as 'priority/cookie' or 'none', outputs as OF ports, final fields)."""
    proto = {0x0806: "arp"}.get(pkt["eth_type"]) or {6: "tcp", 17: "udp"}[pkt["ip_proto"]]
    rename = {"ipv4_src": "nw_src", "ipv4_dst": "nw_dst"}
    fields = ",".join(f"{rename.get(k, k)}={v}" for k, v in pkt.items() if k in TRACE_NAMES)
    done = subprocess.run(
        ["ovs-appctl", "ofproto/trace", bridge_name, f"in_port={in_port},{proto},{fields}"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    text = done.stdout
    rule = re.search(r"^ 0\. .*?priority (\d+)(?:, cookie (0x[0-9a-f]+))?$", text, re.M)
    matched = f"{rule.group(1)}/{int(rule.group(2) or '0', 16):#x}" if rule else "none"
    # a conntrack border recirculates (ct(table=3)): the trace resumes the packet with
    # ct_state=trk|new and the last "Datapath actions" / "Final flow" are where it ends up
    actions = re.findall(r"^Datapath actions: (.*)$", text, re.M)[-1]
    while re.search(r"\([^()]*\)", actions):  # drop set(...), meter(...), keep top-level ports
        actions = re.sub(r"(\w+)\([^()]*\)", lambda m: m.group(1), actions)
    dp_to_of = dp_ports(bridge_name)
    outs: list[Any] = []
    for token in actions.split(","):
        if token.isdigit():
            outs.append(dp_to_of[int(token)])
        elif token.startswith("userspace") or token.startswith("controller"):
            outs.append("CONTROLLER")
    final = dict(pkt)
    line = re.findall(r"^Final flow: (.*)$", text, re.M)[-1]
    if line != "unchanged":
        kv = dict(p.split("=", 1) for p in line.split(",") if "=" in p)
        for key, name in TRACE_NAMES.items():
            if key in final and name in kv:
                final[key] = make_packet(**{key: kv[name]})[key]
    return matched, outs, final


def dp_ports(bridge_name: str) -> dict[int, int]:
    text = subprocess.run(["ovs-appctl", "dpif/show"], check=True, capture_output=True, text=True, timeout=10).stdout
    return {
        int(dp): int(of) for of, dp in re.findall(rf"^\s+{re.escape(bridge_name)}(?:p\d)? (\d+)/(\d+):", text, re.M)
    }


def sim_expectation(table: FlowTable, pkt: dict[str, Any], in_port: int) -> tuple[str, list, dict]:
    entry = table.lookup(pkt, in_port)
    outs = table.process(pkt, in_port)
    final = outs[0][1] if outs else dict(pkt)
    matched = f"{entry.priority}/{entry.cookie:#x}" if entry else "none"
    return matched, [p for p, _ in outs], final


DESKTOP_MAC, FW_MAC = "02:00:00:01:00:10", "02:00:00:02:00:01"
EDGE_MAC, POOL_MAC = "02:00:00:03:00:01", "02:ff:00:00:00:01"
FWD = ip_packet(DESKTOP_MAC, FW_MAC, "10.1.0.10", "203.0.113.10", "tcp", 40000, 5201)
FWD_NAT = ip_packet(POOL_MAC, EDGE_MAC, "198.51.100.200", "203.0.113.10", "tcp", 40000, 5201)
REV = ip_packet(EDGE_MAC, POOL_MAC, "203.0.113.10", "198.51.100.200", "tcp", 5201, 40000)
ARP = make_packet(
    eth_src=EDGE_MAC,
    eth_dst="ff:ff:ff:ff:ff:ff",
    eth_type=0x0806,
    arp_op=1,
    arp_spa="198.51.100.1",
    arp_tpa="198.51.100.200",
)
CASES = [  # (dpid, in_port, packet)
    (1, 1, FWD),
    (1, 1, dict(FWD, tcp_dst=5202)),
    (1, 1, dict(FWD, eth_src="02:00:00:01:00:99")),
    (1, 2, FWD),
    (1, 1, dict(FWD, ipv4_src="10.1.0.11")),
    (1, 3, dict(REV, ipv4_dst="10.1.0.10")),
    (3, 3, FWD_NAT),
    (3, 3, dict(FWD_NAT, tcp_dst=22)),
    (3, 2, REV),
    (3, 2, dict(REV, tcp_src=80)),
    (3, 1, REV),
    (3, 2, ARP),
    (3, 2, dict(ARP, arp_tpa="198.51.100.2")),
    (3, 4, ip_packet("02:00:00:03:00:30", EDGE_MAC, "198.51.100.30", "203.0.113.10", "udp", 5000, 9000)),
]


def test_switch_forwards_like_the_simulator(bridge: tuple[str, RawOpenFlow]) -> None:
    name, conn = bridge
    for dpid in (1, 3):
        ofmsgs = compile_base(CAMPUS)[dpid] + compile_lane(DESKTOP, CAMPUS, NOW)[dpid]
        ofmsgs += compile_lane(DTN, CAMPUS, NOW)[dpid] if dpid == 3 else []
        install(
            conn,
            [
                parser.OFPFlowMod(
                    None,
                    table_id=ofp.OFPTT_ALL,
                    command=ofp.OFPFC_DELETE,
                    out_port=ofp.OFPP_ANY,
                    out_group=ofp.OFPG_ANY,
                )
            ],
        )
        install(conn, [parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=ofp.OFPM_ALL)])
        install(conn, ofmsgs)
        table = FlowTable()
        table.apply_all(ofmsgs)
        for case_dpid, in_port, pkt in CASES:
            if case_dpid != dpid:
                continue
            want = sim_expectation(table, pkt, in_port)
            got = trace(name, pkt, in_port)
            assert got[0] == want[0], (dpid, in_port, pkt)  # the same rule matched
            if "NORMAL" not in want[1]:  # NORMAL floods on a real switch; the rule is enough
                assert got[1:] == want[1:], (dpid, in_port, pkt)


@st.composite
def random_lanes(draw: st.DrawFn) -> LaneSpec:
    host = draw(st.sampled_from([h for h in CAMPUS.hosts if h.role != "cloud"]))
    return LaneSpec(
        lane_id=draw(st.integers(1, 2**20)),
        src_ip=str(host.iface.ip.ip),
        dst_ip=draw(st.sampled_from(["203.0.113.10", "192.0.2.77", "8.8.4.4"])),
        protocol=draw(st.sampled_from(["tcp", "udp"])),
        dst_port=draw(st.integers(1, 65535)),
        src_port=draw(st.one_of(st.none(), st.integers(1, 65535))),
        nat_ip=str(draw(st.sampled_from(CAMPUS.lane_addresses()))) if host.needs_nat else None,
        expires_at=NOW + 600,
        rate_mbps=draw(st.one_of(st.none(), st.just(25.0))),
    )


def lane_packets(lane: LaneSpec, deviate: int) -> list[tuple[int, int, dict[str, Any]]]:
    """(dpid, in_port, packet): the lane's packets at its ingress switches, one field changed
    when ``deviate`` > 0."""
    host = CAMPUS.host_by_ip(lane.src_ip)
    assert host is not None and host.iface.attach is not None
    dpid_in = CAMPUS.switch(host.iface.attach.switch).dpid
    sport = lane.src_port or 33333
    fwd = ip_packet(host.iface.mac, FW_MAC, lane.src_ip, lane.dst_ip, lane.protocol, sport, lane.dst_port)
    rev = ip_packet(EDGE_MAC, POOL_MAC, lane.dst_ip, lane.nat_ip or lane.src_ip, lane.protocol, lane.dst_port, sport)
    key = ["", "ipv4_src", "ipv4_dst", f"{lane.protocol}_dst", f"{lane.protocol}_src"][deviate]
    if key:
        for pkt in (fwd, rev):
            pkt[key] = "192.0.2.99" if key.startswith("ipv4") else (pkt[key] % 65535) + 1
    return [(dpid_in, host.iface.attach.port, fwd), (3, 2, rev)]


@given(lane=random_lanes(), deviate=st.integers(0, 4))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_lanes_forward_like_the_simulator(bridge: tuple[str, RawOpenFlow], lane: LaneSpec, deviate: int) -> None:
    name, conn = bridge
    compiled = compile_lane(lane, CAMPUS, NOW)
    for dpid, in_port, pkt in lane_packets(lane, deviate):
        ofmsgs = compile_base(CAMPUS)[dpid] + compiled.get(dpid, [])
        install(
            conn,
            [
                parser.OFPFlowMod(
                    None,
                    table_id=ofp.OFPTT_ALL,
                    command=ofp.OFPFC_DELETE,
                    out_port=ofp.OFPP_ANY,
                    out_group=ofp.OFPG_ANY,
                ),
                parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=ofp.OFPM_ALL),
            ],
        )
        install(conn, ofmsgs)
        table = FlowTable()
        table.apply_all(ofmsgs)
        want, got = sim_expectation(table, pkt, in_port), trace(name, pkt, in_port)
        assert got[0] == want[0], (dpid, in_port, pkt)
        if "NORMAL" not in want[1]:
            assert got[1:] == want[1:], (dpid, in_port, pkt)


def test_stateless_fallback_flows_are_accepted_and_echoed(bridge: tuple[str, RawOpenFlow]) -> None:
    """The border without conntrack: tcp_flags matches, set-field NAT and the shared ICMP pass
    must be accepted by OVS and come back with the same flow_key (reconcile leaves them)."""
    import dataclasses

    _, conn = bridge
    topo = dataclasses.replace(CAMPUS, switches=tuple(dataclasses.replace(s, conntrack=False) for s in CAMPUS.switches))
    dpid = 3
    ofmsgs = compile_base(topo)[dpid] + compile_lane(DESKTOP, topo, NOW)[dpid]
    ofmsgs += compile_lane(DTN, topo, NOW)[dpid] + compile_shared(topo, [DESKTOP, DTN])[dpid]
    assert not any(getattr(m, "table_id", 0) for m in ofmsgs)  # no conntrack table
    install(conn, ofmsgs)
    sent = {flow_key_of(m) for m in ofmsgs if isinstance(m, parser.OFPFlowMod)}
    assert {flow_key_of(s) for s in conn.flow_stats(*ALL_APP_FLOWS)} == sent
