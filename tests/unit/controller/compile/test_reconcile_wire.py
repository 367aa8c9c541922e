"""flowstats: flow-stats replies decoded from the wire give the same flow identity as os-ken's
parser and as the FlowMods we compiled, and their matches delete exactly that flow."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import FlowTable
from tests.support.flowstats import NOW, flowmods, reply, stats_entry
from tests.support.rawof import FakeDatapath
from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.compile.flowkey import cached_key, flow_key_of
from viplanes.controller.compile.lane import compile_base, compile_lane
from viplanes.controller.compile.reconcile import plan_switch
from viplanes.controller.openflow.flowstats import decode_flow_stats_reply
from viplanes.controller.openflow.guard import OK, check_message
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

LANES = st.builds(
    lambda i, host, proto, dport, sport, rate: LaneSpec(
        i,
        host,
        "203.0.113.10",
        proto,
        dport,
        sport,
        f"198.51.100.{200 + i % 20}" if host.startswith("10.") else None,
        NOW + 600,
        rate,
    ),
    st.integers(1, 5000),
    st.sampled_from(["10.1.0.10", "10.1.0.20", "198.51.100.30"]),
    st.sampled_from(["tcp", "udp"]),
    st.integers(1, 65535),
    st.none() | st.integers(1, 65535),
    st.none() | st.floats(1, 900),
)


@given(lane=LANES)
@settings(max_examples=100, deadline=None)
def test_wire_decode_equals_os_ken_and_the_compiled_flows(topo: Topology, lane: LaneSpec) -> None:
    mods = flowmods(compile_lane(lane, topo, NOW)) + flowmods(compile_base(topo))
    raw = reply([stats_entry(m, packets=3, octets=4500) for m in mods])
    assert check_message(raw).action == OK
    entries, more = decode_flow_stats_reply(raw)
    assert not more
    version, msg_type, length, xid = struct.unpack_from("!BBHI", raw)
    theirs = ofproto_parser.msg(FakeDatapath(), version, msg_type, length, xid, raw).body
    assert [flow_key_of(e) for e in entries] == [flow_key_of(s) for s in theirs]
    assert [flow_key_of(e) for e in entries] == [flow_key_of(m) for m in mods]
    assert [(e.cookie, e.packet_count, e.byte_count, e.duration_sec, e.hard_timeout) for e in entries] == [
        (s.cookie, s.packet_count, s.byte_count, s.duration_sec, s.hard_timeout) for s in theirs
    ]
    assert [e.match.get("in_port") for e in entries] == [s.match.get("in_port") for s in theirs]


@given(lane=LANES)
@settings(max_examples=50, deadline=None)
def test_the_key_a_decoded_entry_comes_with_is_the_one_its_attributes_give(topo: Topology, lane: LaneSpec) -> None:
    """The decoder keys each entry from kept TLVs and instruction lists (a restart decodes tens
    of thousands of repeating flows); that key must be flow_key_of's, cold and warm."""
    mods = flowmods(compile_lane(lane, topo, NOW)) + flowmods(compile_base(topo))
    raw = reply([stats_entry(m) for m in mods])
    first, _ = decode_flow_stats_reply(raw)
    again, _ = decode_flow_stats_reply(raw)  # every TLV and instruction list seen before
    for entries in (first, again):
        assert [cached_key(e) for e in entries] == [flow_key_of(e) for e in entries]
        assert [cached_key(e) for e in entries] == [flow_key_of(m) for m in mods]
    for a, b in zip(first, again, strict=True):  # each entry has its own containers
        assert a.match is not b.match and a.instructions is not b.instructions
    first[0].instructions.clear()
    first[0].match.clear()
    assert again[0].instructions == decode_flow_stats_reply(raw)[0][0].instructions
    assert again[0].match and decode_flow_stats_reply(raw)[0][0].match == again[0].match


def test_stale_flow_read_from_the_wire_is_deleted_exactly(topo: Topology) -> None:
    old = LaneSpec(3, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.201", NOW + 600)
    keep = LaneSpec(4, "10.1.0.20", "203.0.113.10", "udp", 6000, 7000, "198.51.100.202", NOW + 600)
    table = FlowTable()
    table.apply_all(compile_lane(old, topo, NOW)[2] + compile_lane(keep, topo, NOW)[2], NOW)
    raw = reply([stats_entry(m) for m in compile_lane(old, topo, NOW)[2] + compile_lane(keep, topo, NOW)[2]])
    entries, _ = decode_flow_stats_reply(raw)
    plan = plan_switch(compile_lane(keep, topo, NOW)[2], entries, NOW)
    assert len(plan.deletes) == 2 and plan.kept == 2 and not plan.adds
    table.apply_all(plan.ofmsgs, NOW)
    assert {flow_key_of(s) for s in table.stats(*ALL_APP_FLOWS)} == {
        flow_key_of(m) for m in compile_lane(keep, topo, NOW)[2]
    }


def test_more_flag_and_what_it_leaves_to_os_ken(topo: Topology) -> None:
    mods = flowmods(compile_base(topo))
    _entries, more = decode_flow_stats_reply(reply([stats_entry(m) for m in mods], more=True))
    assert more
    ipv6 = parser.OFPFlowMod(
        None,
        cookie=ALL_APP_FLOWS[0],
        priority=5,
        match=parser.OFPMatch(eth_type=0x86DD, ipv6_dst="2001:db8::1"),
        instructions=[],
    )
    assert decode_flow_stats_reply(reply([stats_entry(ipv6)])) is None
    group = parser.OFPFlowMod(
        None,
        cookie=ALL_APP_FLOWS[0],
        priority=5,
        match=parser.OFPMatch(),
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionGroup(1)])],
    )
    decoded = decode_flow_stats_reply(reply([stats_entry(group)]))  # a lane's fast-failover group
    assert decoded is not None and flow_key_of(decoded[0][0]) == flow_key_of(group)
    pop = parser.OFPFlowMod(
        None,
        cookie=ALL_APP_FLOWS[0],
        priority=5,
        match=parser.OFPMatch(),
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionPopVlan()])],
    )
    assert decode_flow_stats_reply(reply([stats_entry(pop)])) is None
    desc = struct.pack("!BBHI", 4, ofp.OFPT_MULTIPART_REPLY, 16, 1) + struct.pack("!HH4x", ofp.OFPMP_PORT_DESC, 0)
    assert decode_flow_stats_reply(desc) is None
