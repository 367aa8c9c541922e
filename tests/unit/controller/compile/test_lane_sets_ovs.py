"""Issue 11 flows against a real Open vSwitch: a v4 lane with several destinations and a masked
port range, a v6 lane (ipv6 fields, ct without NAT, ICMPv6 error plumbing) and a re-activation's
strict deletes are accepted, echoed with the same ``flow_key`` (reconcile's identity) and delete
exactly what they name. Marked integration: needs root and a running ovs-vswitchd."""

from __future__ import annotations

from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import REPO
from tests.support.rawof import RawOpenFlow, install
from viplanes.controller.compile import ctlane, lanediff
from viplanes.controller.compile.flowkey import flow_key_of
from viplanes.controller.compile.lane import ALL_APP_FLOWS, compile_base, compile_lane
from viplanes.controller.compile.shared import compile_shared
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology

pytestmark = pytest.mark.integration
DUALSTACK = load_topology(REPO / "topologies" / "campus-dualstack.yaml")
NOW = 1000.0
SET4 = LaneSpec(
    7,
    "10.1.0.10",
    None,
    "tcp",
    None,
    None,
    "198.51.100.200",
    NOW + 600,
    dst_nets=("203.0.113.10/32", "203.0.113.11/32", "203.0.113.64/28"),
    dst_ports=((50000, 51000),),
)
V6 = LaneSpec(
    8,
    "2001:db8:1::10",
    None,
    "udp",
    None,
    None,
    None,
    NOW + 600,
    rate_mbps=40,
    dst_nets=("2001:db8:ff::10/128", "2001:db8:ff:1::/64"),
    dst_ports=((5201, 5202),),
)


def keys(msgs: list[Any]) -> set[Any]:
    return {flow_key_of(m) for m in msgs if isinstance(m, parser.OFPFlowMod)}


@pytest.mark.parametrize("dpid", [1, 2, 3])
def test_set_range_and_v6_lanes_are_accepted_and_echoed(
    bridge: tuple[str, RawOpenFlow],
    dpid: int,
) -> None:
    _, conn = bridge
    msgs = (
        compile_base(DUALSTACK)[dpid]
        + compile_lane(SET4, DUALSTACK, NOW)[dpid]
        + compile_lane(V6, DUALSTACK, NOW)[dpid]
        + compile_shared(DUALSTACK, [SET4, V6]).get(dpid, [])
    )
    install(conn, msgs)
    assert {flow_key_of(s) for s in conn.flow_stats(*ALL_APP_FLOWS)} == keys(msgs)


def test_reactivation_strict_deletes_remove_only_the_dropped_destination(bridge: tuple[str, RawOpenFlow]) -> None:
    _, conn = bridge
    dpid = 3
    base = compile_base(DUALSTACK)[dpid]
    install(conn, base + compile_lane(SET4, DUALSTACK, NOW)[dpid])
    smaller = LaneSpec(**{**SET4.__dict__, "dst_nets": SET4.dst_nets[:2]})
    new = compile_lane(smaller, DUALSTACK, NOW)
    stale = lanediff.stale_deletes(SET4, new, DUALSTACK, NOW)
    # the lane's new-connection meter is on the switch already: the runtime sends its ADD again and
    # takes METER_EXISTS as no failure (batch.merge); here it is left out of the re-send instead
    resend = [m for m in new[dpid] if not ctlane.is_newconn_meter_add(m)]
    install(conn, resend + stale[dpid])
    assert {flow_key_of(s) for s in conn.flow_stats(*ALL_APP_FLOWS)} == keys(base + new[dpid])


def ovs_trace(bridge_name: str, flow: str) -> str:
    import subprocess

    done = subprocess.run(
        ["ovs-appctl", "ofproto/trace", bridge_name, flow], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


V6_FLOW = (
    "in_port=1,ipv6,nw_proto=17,dl_src=02:00:00:01:00:10,dl_dst=02:00:00:02:00:01,"
    "ipv6_src=2001:db8:1::10,ipv6_dst=2001:db8:ff:1::99,udp_src=40000,udp_dst=5202"
)


@pytest.mark.parametrize(
    "flow,on_lane",
    [
        (V6_FLOW, True),
        (V6_FLOW.replace("udp_dst=5202", "udp_dst=5203"), False),  # outside the port range
        (V6_FLOW.replace(",udp_src=40000,udp_dst=5202", ",nw_frag=later"), False),  # later fragment
        (
            "in_port=1,icmp6,dl_src=02:00:00:01:00:10,dl_dst=33:33:ff:00:00:01,ipv6_src=2001:db8:1::10,"
            "ipv6_dst=ff02::1:ff00:1,icmpv6_type=135",
            False,
        ),  # neighbour solicitation
    ],
)
def test_access_switch_steers_only_the_lane_v6_traffic(
    bridge: tuple[str, RawOpenFlow],
    flow: str,
    on_lane: bool,
) -> None:
    name, conn = bridge
    install(conn, compile_base(DUALSTACK)[1] + compile_lane(V6, DUALSTACK, NOW)[1])
    text = ovs_trace(name, flow)
    if on_lane:
        assert "set_field:02:ff:00:00:00:01->eth_src" in text and "output:3" in text, text
    else:
        assert "NORMAL" in text and "02:ff:00:00:00:01" not in text, text


# On s1 the server's port (2) is another host's port for the desktop's v6 address.
SPOOF_V6 = (
    "in_port=2,ipv6,nw_proto=17,dl_src=02:00:00:01:00:20,dl_dst=02:00:00:02:00:01,"
    "ipv6_src=2001:db8:1::10,ipv6_dst=2001:db8:ff::10,udp_src=40000,udp_dst=9"
)
SPOOF_NA = (
    "in_port=2,icmp6,dl_src=02:00:00:01:00:20,dl_dst=33:33:00:00:00:01,"
    "ipv6_src=fe80::20,ipv6_dst=ff02::1,icmpv6_type=136,nd_target=2001:db8:1::10"
)


@pytest.mark.parametrize(
    "flow,dropped",
    [
        (SPOOF_V6, True),  # the desktop's v6 address from the server's port
        (SPOOF_NA, True),  # a neighbour advertisement claiming it
        (
            SPOOF_V6.replace("in_port=2", "in_port=1").replace("02:00:00:01:00:20", "02:00:00:01:00:10"),
            False,
        ),  # the desktop itself
        (
            SPOOF_NA.replace("in_port=2", "in_port=1")
            .replace("02:00:00:01:00:20", "02:00:00:01:00:10")
            .replace("fe80::20", "fe80::10"),
            False,
        ),  # the desktop advertising its own address
        (SPOOF_V6.replace("ipv6_src=2001:db8:1::10", "ipv6_src=2001:db8:1::20"), False),  # not a host's
    ],
)
def test_a_host_port_cannot_claim_another_hosts_v6_address(
    bridge: tuple[str, RawOpenFlow],
    flow: str,
    dropped: bool,
) -> None:
    name, conn = bridge
    install(conn, compile_base(DUALSTACK)[1])
    text = ovs_trace(name, flow)
    assert ("NORMAL" not in text) == dropped, text


def test_v6_guards_leave_routed_v6_from_a_middlebox_leg_alone() -> None:
    """The NAT box routes the desktop's v6 source untranslated into s3: no guard there."""
    s3 = [m for m in compile_base(DUALSTACK)[3] if isinstance(m, parser.OFPFlowMod)]
    assert not [
        m
        for m in s3
        if dict(m.match.items()).get("ipv6_src") == "2001:db8:1::10" and dict(m.match.items()).get("in_port") == 1
    ]
    assert [
        m
        for m in s3
        if dict(m.match.items()).get("ipv6_src") == "2001:db8:1::10" and dict(m.match.items()).get("in_port") == 4
    ]  # the DTN's port has it
