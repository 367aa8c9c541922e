"""Open vSwitch's own decoder reads every message the compiler builds (`ovs-ofctl ofp-parse`, no
daemon needed): it rejects bad prerequisites and inconsistent set-fields exactly as the switch
would, and prints what it understood."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import REPO
from tests.support.rawof import FakeDatapath
from viplanes.controller.compile.ctlane import NEWCONN_MAX_LANE_ID
from viplanes.controller.compile.lane import (
    compile_base,
    compile_flow_delete,
    compile_lane,
    compile_lane_removal,
)
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology

OFCTL = shutil.which("ovs-ofctl")
pytestmark = pytest.mark.skipif(OFCTL is None, reason="ovs-ofctl (openvswitch-common) not installed")
CAMPUS = load_topology(REPO / "topologies" / "campus.yaml")
NOW = 1000.0


def ovs_view(ofmsgs: list) -> list[str]:
    """OVS's one-line rendering of each message (decode errors included)."""
    wire = b""
    for msg in ofmsgs:
        msg.datapath, msg.xid = FakeDatapath(), 1
        msg.serialize()
        wire += bytes(msg.buf)
    out = subprocess.run(
        [OFCTL, "ofp-parse", "-"], input=wire, capture_output=True, timeout=10, check=True
    ).stdout.decode()
    lines = [line for line in out.splitlines() if line.startswith(("OFPT_", "NXT_"))]
    assert len(lines) == len(ofmsgs), out
    return lines


def flat(by_dpid: dict) -> list:
    return [m for ms in by_dpid.values() for m in ms]


def test_ovs_decodes_base_and_lane_as_intended() -> None:
    lane = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, 40000, "198.51.100.200", NOW + 60, rate_mbps=50)
    lines = ovs_view(
        flat(compile_base(CAMPUS)) + flat(compile_lane(lane, CAMPUS, NOW)) + flat(compile_lane_removal(7, [1, 3]))
    )
    assert not [line for line in lines if "error" in line]
    text = "\n".join(lines)
    assert "priority=100,in_port=3 cookie:0x5650800000000000 out_port:0 actions=drop" in text
    assert "arp,arp_tpa=198.51.100.192/27,arp_op=1" in text
    assert "actions=meter:4294901760,CONTROLLER:65535" in text  # the punt goes through its meter
    ingress = next(line for line in lines if "dl_src=02:00:00:01:00:10" in line)
    for piece in (
        "priority=1001,tcp,in_port=1",
        "vlan_tci=0x0000/0x1fff",
        "nw_src=10.1.0.10",
        "nw_dst=203.0.113.10",
        "tp_src=40000,tp_dst=5201",
        "hard:60",
        "send_flow_rem",
        "actions=meter:7,set_field:02:ff:00:00:00:01->eth_src,output:3",
    ):
        assert piece in ingress
    border = next(
        line for line in lines if "in_port=3,dl_src=02:ff:00:00:00:01,nw_src=10.1.0.10" in line and "ct(" in line
    )
    # the border looks up first (ctlane), and commits in table 3: +new without an entry (ct_mark
    # 0) through the lane's new-connection meter, the rest unmetered (issue 42)
    assert border.endswith("actions=set_field:0x7->reg0,ct(table=3,zone=4105)"), border
    commit = "ct(commit,table=2,zone=4105,nat(src=198.51.100.200),exec(set_field:0x7->ct_mark))"
    [new] = [line for line in lines if "table:3 priority=101,ct_state=+new-inv+trk,ct_mark=0,ip,reg0=0x7" in line]
    assert new.endswith(f"actions=meter:2147483655,{commit}"), new
    [rest] = [line for line in lines if "table:3 priority=100,ct_state=-inv+trk,ip,reg0=0x7" in line]
    assert rest.endswith(f"actions={commit}"), rest
    assert "ADD meter=2147483655 pktps burst bands=" in "\n".join(lines)
    assert any("table:3 priority=0" in line and line.endswith("actions=drop") for line in lines)
    # the egress table sends on only what conntrack tracked as valid and translated
    [egress] = [line for line in lines if "table:2 priority=100" in line]
    for piece in (
        "ct_state=-inv+trk",
        "nw_src=198.51.100.192/27",
        "actions=set_field:02:ff:00:00:00:01->eth_src,set_field:02:00:00:03:00:01->eth_dst,output:2",
    ):
        assert piece in egress, egress
    assert any("table:2 priority=0" in line and line.endswith("actions=drop") for line in lines)
    assert "in_port=2,nw_src=203.0.113.10,nw_dst=198.51.100.200,tp_src=5201,tp_dst=40000" in text
    assert "actions=meter:7,ct(table=1,zone=4105,nat)" in text
    assert "table:1 priority=1000,ct_state=+est+rpl-inv+trk,ct_mark=0x7,ip,in_port=2" in text
    assert "OFPT_METER_MOD (OF1.3) (xid=0x1): ADD meter=7 kbps" in text
    assert "DEL table:255 cookie:0x5650000000000007/0xffffffffffffffff" in text


def test_ovs_decodes_the_pool_addresses_related_icmp_in_its_zone() -> None:
    """Errors for a lane-pool address are looked up in that address's zone (the default base
    4096 + 1 + its offset in the pool: 198.51.100.200 -> 4105), the zone its lanes commit in; the
    base rule looks up the deployment's first zone, 4096."""
    from viplanes.controller.compile.shared import compile_shared

    lane = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.200", NOW + 60)
    lines = ovs_view(flat(compile_shared(CAMPUS, [lane])) + flat(compile_base(CAMPUS)))
    for icmp_type in (3, 11):
        [nat] = [
            ln for ln in lines if f"priority=951,icmp,in_port=2,nw_dst=198.51.100.200,icmp_type={icmp_type} " in ln
        ]
        assert nat.endswith("actions=ct(table=1,zone=4105,nat)"), nat
        [base] = [ln for ln in lines if f"priority=950,icmp,in_port=2,icmp_type={icmp_type} " in ln]
        assert base.endswith("actions=ct(table=1,zone=4096,nat)"), base


def test_ovs_decodes_strict_delete() -> None:
    lane = LaneSpec(9, "198.51.100.30", "203.0.113.10", "udp", 9000, None, None, NOW + 60)
    flow = compile_lane(lane, CAMPUS, NOW)[3][0]
    [line] = ovs_view([compile_flow_delete(flow)])
    assert "DEL_STRICT" in line and "priority=1000,udp,in_port=4" in line
    assert "cookie:0x5650000000000009/0xffffffffffffffff" in line


@st.composite
def lanes(draw: st.DrawFn) -> LaneSpec:
    host = draw(st.sampled_from([h for h in CAMPUS.hosts if h.role != "cloud"]))
    return LaneSpec(
        lane_id=draw(st.integers(1, NEWCONN_MAX_LANE_ID)),  # a conntrack border (ctlane)
        src_ip=str(host.iface.ip.ip),
        dst_ip=str(
            draw(
                st.integers(0x01000000, 0xDFFFFFFF)
                .map(ipaddress.IPv4Address)
                .filter(lambda a: not a.is_loopback and a not in CAMPUS.edge.inside.ip.network and not a.is_private)
            )
        ),
        protocol=draw(st.sampled_from(["tcp", "udp"])),
        dst_port=draw(st.integers(1, 65535)),
        src_port=draw(st.one_of(st.none(), st.integers(1, 65535))),
        nat_ip=str(draw(st.sampled_from(CAMPUS.lane_addresses()))) if host.needs_nat else None,
        expires_at=NOW + draw(st.floats(0.001, 10**7)),
        rate_mbps=draw(st.one_of(st.none(), st.floats(0.001, 10**5))),
    )


@given(lanes())
@settings(max_examples=60, deadline=None)
def test_ovs_accepts_every_random_lane(lane: LaneSpec) -> None:
    ofmsgs = flat(compile_lane(lane, CAMPUS, NOW))
    lines = ovs_view(ofmsgs + flat(compile_lane_removal(lane.lane_id, [1])))
    assert not [line for line in lines if "error" in line], lines
    adds = [
        line
        for line in lines
        if "OFPT_FLOW_MOD" in line and " ADD " in line and "table:1" not in line and "table:3" not in line
    ]
    commits = [line for line in lines if "table:3" in line]  # +new (metered) and the rest: ctlane
    assert len(commits) == 2 and all(f"reg0={lane.lane_id:#x}" in c for c in commits)
    replies = [line for line in lines if "table:1" in line]
    assert len(adds) == 2 * len(compile_lane(lane, CAMPUS, NOW))  # forward + reverse per switch
    assert len(replies) == 2 and all(f"ct_mark={lane.lane_id:#x}" in r for r in replies)
    for line in adds:
        assert f",{lane.protocol}," in line
        forward = f"tp_dst={lane.dst_port}" in line and f"nw_dst={lane.dst_ip}" in line
        reverse = f"tp_src={lane.dst_port}" in line and f"nw_src={lane.dst_ip}" in line
        assert forward or reverse, line
        assert "->ip_" not in line  # addresses are translated by conntrack only
        assert ("nat(src=" in line) == (lane.nat_ip is not None and "ct(commit" in line)
        if lane.nat_ip is not None and "ct(commit" in line:
            assert f"nat(src={lane.nat_ip})" in line
