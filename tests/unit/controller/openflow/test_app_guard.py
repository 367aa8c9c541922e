"""The malformed-message guard: what it lets through os-ken's parser always parses in bounded time,
hostile length fields are refused, and a live controller survives hostile peers.

os-ken 4.2.2's parsers loop forever on these messages (checked by hand: a parse thread still runs
after 1 s); here we only assert what the guard does and that the controller stays healthy.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import REPO
from tests.support.peer import Peer, msg
from tests.support.procs import free_port, stop_process
from tests.support.rawof import FakeDatapath
from viplanes.controller.openflow.guard import DROP, OK, REJECT, check_message


def match_bytes(**fields) -> bytes:
    buf = bytearray()
    parser.OFPMatch(**fields).serialize(buf, 0)
    return bytes(buf)


def instructions_bytes(port: int = 2) -> bytes:
    buf = bytearray()
    parser.OFPInstructionActions(
        ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionSetField(ipv4_src="198.51.100.200"), parser.OFPActionOutput(port)]
    ).serialize(buf, 0)
    return bytes(buf)


def nicira_instructions_bytes() -> bytes:
    """ct(commit, nat(src=...)) then controller2 with userdata: the Nicira actions whose os-ken
    parsers walk inner lengths."""
    buf = bytearray()
    parser.OFPInstructionActions(
        ofp.OFPIT_APPLY_ACTIONS,
        [
            parser.NXActionCT(
                flags=1,
                zone_src="",
                zone_ofs_nbits=0,
                recirc_table=255,
                alg=0,
                actions=[parser.NXActionNAT(flags=1, range_ipv4_min="198.51.100.200", range_ipv4_max="198.51.100.200")],
            ),
            parser.NXActionController2(max_len=128, userdata=[1, 2, 3, 4, 5]),
        ],
    ).serialize(buf, 0)
    return bytes(buf)


def flow_stats_entry(cookie: int = 0x5650000000000001, nicira: bool = False) -> bytes:
    m = match_bytes(in_port=1, eth_type=0x0800, ipv4_dst="203.0.113.10")
    i = nicira_instructions_bytes() if nicira else instructions_bytes()
    fixed = struct.pack("!HBxIIHHHH4xQQQ", 48 + len(m) + len(i), 0, 5, 0, 1000, 0, 600, 1, cookie, 10, 1500)
    return fixed + m + i


def flow_stats_reply(entries: int = 2, nicira: bool = False) -> bytes:
    return msg(
        ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", ofp.OFPMP_FLOW, 0) + flow_stats_entry(nicira=nicira) * entries
    )


def nicira_flow_stats(edit: Any = None) -> bytes:
    """One flow-stats entry with ct(nat) and controller2; ``edit(entry, at)`` changes its bytes,
    ``at`` being where the first action (ct) starts."""
    entry = bytearray(flow_stats_entry(nicira=True))
    if edit is not None:
        edit(entry, len(entry) - len(nicira_instructions_bytes()) + 8)
    return msg(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", ofp.OFPMP_FLOW, 0) + bytes(entry))


def _zero_ct_nested_length(entry: bytearray, ct: int) -> None:
    """The action inside ct() becomes another experimenter's, of length 0: os-ken keeps its
    header length, so the list never advances."""
    struct.pack_into("!HHI", entry, ct + 24, ofp.OFPAT_EXPERIMENTER, 0, 0x00D0F00D)


def _zero_userdata_length(entry: bytearray, ct: int) -> None:
    controller2 = ct + struct.unpack_from("!H", entry, ct + 2)[0]
    props = controller2 + 16
    while struct.unpack_from("!H", entry, props)[0] != 3:  # NXAC2PT_USERDATA
        props += 8
    struct.pack_into("!H", entry, props + 2, 0)


def _ct(*inner: Any) -> Any:
    return parser.NXActionCT(flags=1, zone_src="", zone_ofs_nbits=0, recirc_table=255, alg=0, actions=list(inner))


def ct_in_ct_in_ct() -> bytes:
    """ct(ct(ct())): os-ken would recurse as deep as the bytes go; OVS allows no ct inside ct."""
    buf = bytearray()
    parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [_ct(_ct(_ct()))]).serialize(buf, 0)
    m = match_bytes(in_port=1)
    fixed = struct.pack(
        "!HBxIIHHHH4xQQQ", 48 + len(m) + len(buf), 0, 5, 0, 1000, 0, 600, 1, 0x5650000000000001, 10, 1500
    )
    return msg(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", ofp.OFPMP_FLOW, 0) + fixed + m + bytes(buf))


def packet_in() -> bytes:
    body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, 60, 1, 0, 0) + match_bytes(in_port=2)
    return msg(ofp.OFPT_PACKET_IN, body + b"\0\0" + b"\xff" * 60)


def flow_removed() -> bytes:
    body = struct.pack("!QHBBIIHHQQ", 0x5650000000000001, 1000, 1, 0, 600, 0, 0, 600, 3, 300)
    return msg(ofp.OFPT_FLOW_REMOVED, body + match_bytes(in_port=1, eth_type=0x0800))


VALID = {
    "hello": msg(ofp.OFPT_HELLO, struct.pack("!HHI", 1, 8, 1 << 4)),
    "hello 1.5": msg(ofp.OFPT_HELLO, struct.pack("!HHI", 1, 8, 0x7E), version=6),
    "features": msg(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", 2, 0, 254, 0, 0, 0)),
    "barrier": msg(ofp.OFPT_BARRIER_REPLY, b""),
    "echo": msg(ofp.OFPT_ECHO_REQUEST, b"ping"),
    "error": msg(ofp.OFPT_ERROR, struct.pack("!HH", 5, 6) + b"\x04\x0e\x00\x08\0\0\0\1"),
    "flow stats": flow_stats_reply(),
    "flow stats, Nicira ct(nat) and controller2": nicira_flow_stats(),
    "empty flow stats": flow_stats_reply(0),
    "packet-in": packet_in(),
    "flow removed": flow_removed(),
}

HOSTILE = {
    "hello element length 0": msg(ofp.OFPT_HELLO, struct.pack("!HH4x", 1, 0)),
    "flow-stats entry length 0": msg(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", 1, 0) + b"\0" * 64),
    "instruction length 0": msg(
        ofp.OFPT_MULTIPART_REPLY,
        struct.pack("!HH4x", 1, 0)
        + (
            lambda m: (
                struct.pack("!HBxIIHHHH4xQQQ", 48 + len(m) + 8, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0)
                + m
                + struct.pack("!HH4x", 4, 0)
            )
        )(match_bytes(in_port=1)),
    ),
    "action length 0": msg(
        ofp.OFPT_MULTIPART_REPLY,
        struct.pack("!HH4x", 1, 0)
        + (
            lambda m: (
                struct.pack("!HBxIIHHHH4xQQQ", 48 + len(m) + 16, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0)
                + m
                + struct.pack("!HH4x", 4, 16)
                + struct.pack("!HH4x", 0, 0)
            )
        )(match_bytes(in_port=1)),
    ),
    "match length past the message": msg(
        ofp.OFPT_PACKET_IN, struct.pack("!IHBBQ", 0, 0, 0, 0, 0) + struct.pack("!HH", 1, 200) + b"\0" * 4
    ),
    "flow-mod from a switch": msg(
        ofp.OFPT_FLOW_MOD, b"\0" * 40 + struct.pack("!HH4x", 1, 4) + struct.pack("!HH4x", 4, 0)
    ),
    "header length below 8": struct.pack("!BBHI", 4, 0, 0, 1),
    "OpenFlow 1.0 message": msg(ofp.OFPT_PACKET_IN, b"\0" * 20, version=1),
    "ct nested action length 0": nicira_flow_stats(_zero_ct_nested_length),
    "controller2 userdata length 0": nicira_flow_stats(_zero_userdata_length),
    "ct in ct in ct": ct_in_ct_in_ct(),
}


class _TooLong(BaseException):
    pass


def parses_in_time(raw: bytes, seconds: float = 1.0) -> bool:
    """os-ken parses ``raw`` (or raises) within ``seconds``. Runs on the main thread under a
    timer signal, which interrupts a parser's loop: a loop in a thread would run on (and one of
    them grows a list until the machine is out of memory). os-ken's ``msg`` swallows every
    exception, the timer's too, so whether the timer fired is what tells; it repeats every
    50 ms in case one lands where Python cannot raise it (a finalizer)."""
    version, msg_type, length, xid = struct.unpack_from("!BBHI", raw)
    state = {"done": False, "fired": False}

    def too_long(*_: Any) -> None:
        state["fired"] = True
        if not state["done"]:
            raise _TooLong

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        try:
            ofproto_parser.msg(FakeDatapath(), version, msg_type, length, xid, raw)
        finally:
            state["done"] = True
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    except _TooLong:
        pass
    except Exception:
        pass
    return not state["fired"]


_PARSE_STDIN = """
import resource, struct, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from os_ken.ofproto import ofproto_parser, ofproto_protocol
raw = sys.stdin.buffer.read()
version, msg_type, length, xid = struct.unpack_from("!BBHI", raw)
ofproto_parser.msg(ofproto_protocol.ProtocolDesc(version), version, msg_type, length, xid, raw)
"""


def os_ken_hangs_on(raw: bytes, seconds: float = 1.0) -> bool:
    """os-ken, in a child process capped at 1 GiB, is still parsing ``raw`` after ``seconds``
    (or ran out of its memory doing it)."""
    try:
        done = subprocess.run([sys.executable, "-c", _PARSE_STDIN], input=raw, capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return True
    return b"MemoryError" in done.stderr


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_messages_pass_and_parse(name: str) -> None:
    raw = VALID[name]
    assert check_message(raw).action == OK, check_message(raw).reason
    assert parses_in_time(raw)


def test_flow_stats_reach_os_ken_intact() -> None:
    version, msg_type, length, xid = struct.unpack_from("!BBHI", VALID["flow stats"])
    reply = ofproto_parser.msg(FakeDatapath(), version, msg_type, length, xid, VALID["flow stats"])
    assert [s.cookie for s in reply.body] == [0x5650000000000001] * 2
    assert reply.body[0].match["ipv4_dst"] == "203.0.113.10"


REASONS = {
    "hello element length 0": "hello element type 1 length 0",
    "flow-stats entry length 0": "flow-stats entry length 0",
    "instruction length 0": "instruction type 4 length 0",
    "action length 0": "action type 0 length 0",
    "match length past the message": "match length 200",
    "flow-mod from a switch": "type 14 is not one a switch sends",
    "header length below 8": "header length 0",
    "OpenFlow 1.0 message": "only OpenFlow 1.3",
    "ct nested action length 0": "action type 65535 length 0 is not a multiple of 8",
    "controller2 userdata length 0": "controller2 property type 3 length 0",
    "ct in ct in ct": "nested 3 deep",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_lengths_are_rejected(name: str) -> None:
    verdict = check_message(HOSTILE[name])
    assert verdict.action == REJECT
    assert REASONS[name] in verdict.reason


@pytest.mark.parametrize("name", ["ct nested action length 0", "controller2 userdata length 0"])
def test_os_ken_itself_hangs_on_the_nicira_lengths_the_guard_rejects(name: str) -> None:
    """Why the guard walks inside Nicira actions (os-ken 4.2.2); if this fails, os-ken was fixed."""
    assert os_ken_hangs_on(HOSTILE[name], 2.0)


def test_unrequested_but_well_framed_messages_are_dropped() -> None:
    assert check_message(msg(ofp.OFPT_EXPERIMENTER, b"\0" * 8)).action == DROP
    group_stats = msg(  # OFPMP_GROUP (counters): never asked
        ofp.OFPT_MULTIPART_REPLY,
        struct.pack("!HH4x", ofp.OFPMP_GROUP, 0) + struct.pack("!H2xI", 40, 1) + b"\0" * 32,
    )
    assert check_message(group_stats).action == DROP


def _group_desc(*buckets: bytes) -> bytes:
    body = b"".join(buckets)
    entry = struct.pack("!HBxI", 8 + len(body), ofp.OFPGT_FF, 0x10000001) + body
    return msg(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", ofp.OFPMP_GROUP_DESC, 0) + entry)


def _bucket(length: int, port: int) -> bytes:
    output = struct.pack("!HHIH6x", ofp.OFPAT_OUTPUT, 16, port, 0)
    return struct.pack("!HHII4x", length, 0, port, ofp.OFPG_ANY) + output


def test_group_descriptions_are_walked_before_os_ken_parses_them() -> None:
    """Reconcile asks each switch's groups (fast failover); a bucket of length 0 would spin
    os-ken's parser, one longer than its group would read past it."""
    assert check_message(_group_desc(_bucket(32, 3), _bucket(32, 4))).action == OK
    assert check_message(_group_desc(_bucket(0, 3))).action == REJECT
    assert check_message(_group_desc(_bucket(64, 3))).action == REJECT


@given(
    base=st.sampled_from(sorted(VALID)),
    edits=st.lists(st.tuples(st.integers(8, 400), st.integers(0, 0xFFFF), st.booleans()), min_size=1, max_size=4),
    cut=st.integers(0, 64),
)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_the_guard_lets_through_parses_in_bounded_time(base: str, edits, cut: int) -> None:
    raw = bytearray(VALID[base])
    for pos, value, small in edits:
        if pos + 2 <= len(raw):  # overwrite a 16-bit field, often with a tiny "length"
            struct.pack_into("!H", raw, pos, value % 17 if small else value)
    if cut and cut < len(raw) - 8:
        del raw[-cut:]
    struct.pack_into("!H", raw, 2, len(raw))  # framing stays right: the body is what's hostile
    verdict = check_message(bytes(raw))
    assert verdict.action in (OK, DROP, REJECT)
    if verdict.action == OK:
        assert parses_in_time(bytes(raw)), f"guard passed a message that hangs os-ken: {raw.hex()}"


@pytest.fixture
def osken_controller(tmp_path: Path):
    port = free_port()
    log = tmp_path / "controller.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "viplanes.cli.main",
                "controller",
                "run",
                "--listen",
                f"127.0.0.1:{port}",
                "--insecure-tcp",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=dict(os.environ),
        )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "OpenFlow listening" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
        yield proc, port, log
    finally:
        stop_process(proc, 10)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_hostile_peers_cost_only_their_own_connection(osken_controller) -> None:
    proc, port, log = osken_controller
    good = Peer(port, dpid=77)
    good.handshake()
    assert good.serve_until(ofp.OFPT_FLOW_MOD) is not None  # reconciled: table-miss arrives
    cpu0 = _cpu_seconds(proc.pid)
    for name in sorted(HOSTILE):
        evil = Peer(port, dpid=66)
        if name != "hello element length 0":
            evil.handshake()
        evil.sock.sendall(HOSTILE[name])
        assert evil.closed_by_controller(), f"{name}: connection left open"
        evil.close()
    time.sleep(0.5)
    assert _cpu_seconds(proc.pid) - cpu0 < 2.0, "a parser thread is spinning"
    # the good switch is still served: its echo is answered, and a newcomer still joins
    good.sock.sendall(msg(ofp.OFPT_ECHO_REQUEST, b"still?", xid=4242))
    reply = good.serve_until(ofp.OFPT_ECHO_REPLY)
    assert reply is not None and reply[8:] == b"still?"
    late = Peer(port, dpid=78)
    late.handshake()
    assert late.serve_until(ofp.OFPT_FLOW_MOD) is not None
    text = log.read_text()
    assert "switch connected dpid=78" in text
    assert text.count("malformed message") >= len(HOSTILE) - 1
    assert proc.poll() is None
    good.close()
    late.close()
