"""What crosses the wire: every compiled message encodes, flow_key survives the switch's echo,
cookies address the right flows, and proxy ARP answers only what it should."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.lib.packet import arp, ether_types, ethernet, packet
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import REPO
from viplanes.controller.compile import cookies
from viplanes.controller.compile.ctlane import NEWCONN_MAX_LANE_ID
from viplanes.controller.compile.flowkey import flow_key_of, match_key
from viplanes.controller.compile.lane import (
    compile_base,
    compile_lane,
    compile_lane_removal,
    flow_key,
    lane_cookie,
    lane_id_from_cookie,
    lane_pool_arp_reply,
)
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

NOW = 1000.0


def all_messages(topo: Topology) -> list:
    lanes = [
        LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.200", NOW + 60, rate_mbps=20),
        LaneSpec(9, "198.51.100.30", "203.0.113.10", "udp", 9000, 5000, None, NOW + 60),
    ]
    msgs = [(d, m) for d, ms in compile_base(topo).items() for m in ms]
    for lane in lanes:
        msgs += [(d, m) for d, ms in compile_lane(lane, topo, NOW).items() for m in ms]
        msgs += [(d, m) for d, ms in compile_lane_removal(lane.lane_id, [1, 3]).items() for m in ms]
    return msgs


class FakeDatapath:
    """Just enough of an os-ken Datapath for msg.serialize()."""

    ofproto = ofp
    ofproto_parser = parser
    id = 1

    def set_xid(self, msg: object) -> None:  # pragma: no cover - not used by serialize
        pass


def encode(msg: object) -> bytes:
    msg.datapath = FakeDatapath()  # type: ignore[attr-defined]
    msg.xid = 1  # type: ignore[attr-defined]
    msg.serialize()  # type: ignore[attr-defined]
    return bytes(msg.buf)  # type: ignore[attr-defined]


def test_every_message_encodes(topo: Topology) -> None:
    for _, msg in all_messages(topo):
        data = encode(msg)
        version, msg_type, length, _ = struct.unpack_from("!BBHI", data)
        assert (version, length) == (ofp.OFP_VERSION, len(data))
        assert msg_type in (ofp.OFPT_FLOW_MOD, ofp.OFPT_METER_MOD)


def as_flow_stats(fm: parser.OFPFlowMod, packets: int = 5) -> parser.OFPFlowStats:
    """Encode the flow the way a switch reports it in a flow-stats reply, then parse it back."""
    body = bytearray()
    fm.match.serialize(body, 0)
    match_len = len(body)
    for inst in fm.instructions:
        inst.serialize(body, len(body))
    length = ofp.OFP_FLOW_STATS_0_SIZE + len(body)
    head = struct.pack(
        ofp.OFP_FLOW_STATS_0_PACK_STR,
        length,
        fm.table_id,
        12,
        34,
        fm.priority,
        fm.idle_timeout,
        max(0, fm.hard_timeout - 12),
        fm.flags,
        fm.cookie,
        packets,
        packets * 1000,
    )
    assert match_len % 8 == 0
    return parser.OFPFlowStats.parser(head + bytes(body), 0)


def test_flow_key_survives_the_switch_echo(topo: Topology) -> None:
    flows = [(d, m) for d, m in all_messages(topo) if isinstance(m, parser.OFPFlowMod) and m.command == ofp.OFPFC_ADD]
    keys = {(d, flow_key_of(f)) for d, f in flows}
    assert len(keys) == len(flows)  # distinct flows of one switch have distinct keys
    for _, fm in flows:
        echoed = as_flow_stats(fm)
        assert flow_key(echoed.priority, echoed.cookie, echoed.match, echoed.instructions) == flow_key(
            fm.priority, fm.cookie, fm.match, fm.instructions
        )


def test_flow_key_sees_real_differences(topo: Topology) -> None:
    lane = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.200", NOW + 60)
    base = compile_lane(lane, topo, NOW)[1][0]
    other_port = compile_lane(dataclasses.replace(lane, dst_port=5202, dst_ports=()), topo, NOW)[1][0]
    # NAT happens at the border switch (s3): its forward flow commits with the lane address
    other_nat = compile_lane(dataclasses.replace(lane, nat_ip="198.51.100.201"), topo, NOW)[3][0]
    later = compile_lane(lane, topo, NOW + 30)[1][0]  # only the timeout differs
    assert flow_key_of(base) != flow_key_of(other_port)
    assert flow_key_of(compile_lane(lane, topo, NOW)[3][0]) != flow_key_of(other_nat)
    assert flow_key_of(base) == flow_key_of(later)


def test_match_key_is_order_and_case_independent() -> None:
    a = {
        "eth_src": "02:AA:00:00:00:01",
        "eth_type": 0x800,
        "ipv4_src": "10.0.0.1",
        "arp_tpa": ("10.0.0.7", "255.255.255.0"),
    }
    b = {
        "arp_tpa": ("10.0.0.0", "255.255.255.0"),
        "ipv4_src": "10.0.0.1",
        "eth_type": 2048,
        "eth_src": "02:aa:00:00:00:01",
    }
    assert match_key(a) == match_key(b)
    assert match_key({"ipv4_src": ("10.0.0.1", "255.255.255.255")}) == match_key({"ipv4_src": "10.0.0.1"})
    assert match_key({"ipv4_src": "10.0.0.1"}) != match_key({"ipv4_src": "10.0.0.2"})


def test_empty_apply_actions_equals_no_instructions() -> None:
    drop = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [])]
    m = parser.OFPMatch(in_port=3)
    assert flow_key(100, 1, m, drop) == flow_key(100, 1, m, [])


@given(st.integers(1, cookies.LANE_ID_MAX))
@settings(max_examples=100, deadline=None)
def test_cookie_round_trip(lane_id: int) -> None:
    cookie = lane_cookie(lane_id)
    assert lane_id_from_cookie(cookie) == lane_id
    all_lanes, mask = cookies.ALL_LANE_FLOWS
    assert cookie & mask == all_lanes & mask
    app, app_mask = cookies.ALL_APP_FLOWS
    assert cookie & app_mask == app


def test_cookie_edges() -> None:
    assert lane_id_from_cookie(cookies.BASE_COOKIE) is None
    assert lane_id_from_cookie(0x1234) is None  # someone else's flow
    assert lane_id_from_cookie(cookies.APP_COOKIE) is None
    base, mask = cookies.ALL_LANE_FLOWS
    assert cookies.BASE_COOKIE & mask != base & mask  # "all lane flows" never selects base flows
    for bad in (0, -1, cookies.LANE_ID_MAX + 1, True, 1.5):
        with pytest.raises(ValueError):
            lane_cookie(bad)  # type: ignore[arg-type]


# ---- proxy ARP ---------------------------------------------------------------------------
EDGE_MAC = "02:00:00:03:00:01"


def arp_frame(target: str, opcode: int = arp.ARP_REQUEST, sender_ip: str = "198.51.100.1") -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=EDGE_MAC, ethertype=ether_types.ETH_TYPE_ARP))
    pkt.add_protocol(
        arp.arp(opcode=opcode, src_mac=EDGE_MAC, src_ip=sender_ip, dst_mac="00:00:00:00:00:00", dst_ip=target)
    )
    pkt.serialize()
    return bytes(pkt.data)


def test_arp_reply_for_active_lane_address(topo: Topology) -> None:
    reply = lane_pool_arp_reply(topo, {"198.51.100.200"}, arp_frame("198.51.100.200"))
    assert reply is not None
    pkt = packet.Packet(reply)
    eth, ans = pkt.get_protocol(ethernet.ethernet), pkt.get_protocol(arp.arp)
    assert (eth.src, eth.dst) == (topo.lane_pool.mac, EDGE_MAC)
    assert (ans.opcode, ans.src_mac, ans.src_ip) == (arp.ARP_REPLY, topo.lane_pool.mac, "198.51.100.200")
    assert (ans.dst_mac, ans.dst_ip) == (EDGE_MAC, "198.51.100.1")


@pytest.mark.parametrize(
    "frame,active",
    [
        (arp_frame("198.51.100.201"), {"198.51.100.200"}),  # pool address, no active lane
        (arp_frame("198.51.100.2"), {"198.51.100.2"}),  # "active" but not in the pool
        (arp_frame("198.51.100.200", opcode=arp.ARP_REPLY), {"198.51.100.200"}),
        (b"", {"198.51.100.200"}),
        (b"\xff" * 60, {"198.51.100.200"}),
        (arp_frame("198.51.100.200")[:30], {"198.51.100.200"}),  # truncated
        ("not bytes", {"198.51.100.200"}),
    ],
)
def test_no_arp_reply(topo: Topology, frame: bytes, active: set) -> None:
    assert lane_pool_arp_reply(topo, active, frame) is None


@given(st.binary(max_size=120))
@settings(max_examples=200, deadline=None)
def test_arp_reply_never_raises_on_garbage(data: bytes) -> None:
    frame = arp_frame("198.51.100.200")
    for candidate in (data, frame[:14] + data, frame[: len(data) % len(frame)] + data):
        result = lane_pool_arp_reply(load_topology_cached(), {"198.51.100.200"}, candidate)
        assert result is None or isinstance(result, bytes)


def tcp_frame_with_a_zero_length_option() -> bytes:
    """Ethernet + IPv4 + a TCP header whose one option has an unknown kind and length 0."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 24, 0, 0, 64, 6, 0, bytes(4), bytes(4))
    tcp = struct.pack("!HHIIBBHHH", 1234, 80, 0, 0, 6 << 4, 0x02, 1024, 0, 0) + bytes([0x50, 0, 0, 0])
    return bytes(6) + bytes(6) + struct.pack("!H", ether_types.ETH_TYPE_IP) + ip + tcp


_PACKET_STDIN = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from os_ken.lib.packet import packet
packet.Packet(sys.stdin.buffer.read())
"""


def test_a_frame_os_ken_would_never_finish_parsing_gets_no_answer(topo: Topology) -> None:
    """A switch that lies may punt any frame; only its ARP header is parsed, never the rest."""
    import subprocess
    import sys

    frame = tcp_frame_with_a_zero_length_option()
    try:  # the attack is real: os-ken's whole-packet parser loops on it
        done = subprocess.run([sys.executable, "-c", _PACKET_STDIN], input=frame, capture_output=True, timeout=1.0)
        hung = b"MemoryError" in done.stderr
    except subprocess.TimeoutExpired:
        hung = True
    assert hung
    assert answer_within(1.0, topo, frame) is None


class _TooLong(BaseException):
    """Not an Exception: the reply builder's catch-all must not swallow it."""


def answer_within(seconds: float, topo: Topology, frame: bytes) -> bytes | None:
    """The proxy's answer, on the main thread under a timer signal: fail instead of hanging."""
    import signal

    def too_long(*_: object) -> None:
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        return lane_pool_arp_reply(topo, {"198.51.100.200"}, frame)
    except _TooLong:
        pytest.fail(f"still parsing the frame after {seconds} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_arp_request_with_bytes_after_it_is_still_answered(topo: Topology) -> None:
    """Ethernet pads short frames: whatever follows the 28-byte ARP header is ignored."""
    reply = lane_pool_arp_reply(topo, {"198.51.100.200"}, arp_frame("198.51.100.200") + bytes(18))
    assert reply is not None and packet.Packet(reply).get_protocol(arp.arp).src_ip == "198.51.100.200"


_TOPO: list[Topology] = []


def load_topology_cached() -> Topology:
    if not _TOPO:
        _TOPO.append(load_topology(REPO / "topologies" / "campus.yaml"))
    return _TOPO[0]


@st.composite
def campus_lanes(draw: st.DrawFn) -> LaneSpec:
    topo = load_topology_cached()
    host = draw(st.sampled_from([h for h in topo.hosts if h.role != "cloud"]))
    return LaneSpec(
        lane_id=draw(st.integers(1, NEWCONN_MAX_LANE_ID)),  # a conntrack border: ctlane
        src_ip=str(host.iface.ip.ip),
        dst_ip=draw(st.sampled_from(["203.0.113.10", "192.0.2.1", "8.8.8.8", "100.0.0.1"])),
        protocol=draw(st.sampled_from(["tcp", "udp"])),
        dst_port=draw(st.integers(1, 65535)),
        src_port=draw(st.one_of(st.none(), st.integers(1, 65535))),
        nat_ip=str(draw(st.sampled_from(topo.lane_addresses()))) if host.needs_nat else None,
        expires_at=NOW + 60,
        rate_mbps=draw(st.one_of(st.none(), st.just(10.0))),
    )


@given(campus_lanes())
@settings(max_examples=100, deadline=None)
def test_fast_match_is_exactly_what_os_ken_builds(lane: LaneSpec) -> None:
    """compile_lane builds matches without os-ken's conversions; they must be indistinguishable
    from ``OFPMatch(**fields)``: same fields, same order, same bytes."""
    for ofmsgs in compile_lane(lane, load_topology_cached(), NOW).values():
        for msg in ofmsgs:
            if not isinstance(msg, parser.OFPFlowMod):
                continue
            reference = parser.OFPMatch(**dict(msg.match.items()))
            assert list(msg.match.items()) == list(reference.items())
            mine, theirs = bytearray(), bytearray()
            msg.match.serialize(mine, 0)
            reference.serialize(theirs, 0)
            assert mine == theirs
