"""flowstats decodes flow-stats replies without the guard's pass over them first: whatever it
accepts, the guard accepts too, and it never loops, raises, or accepts a length the guard would
reject (a switch is an attacker here: issue 7). Whatever it turns down goes to the guard."""

from __future__ import annotations

import signal
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as ofp

from tests.support.flowstats import NOW, flowmods, reply, stats_entry
from viplanes.controller.compile.lane import compile_base, compile_lane
from viplanes.controller.openflow import flowstats
from viplanes.controller.openflow.guard import REJECT, check_message
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

LANE = LaneSpec(7, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.207", NOW + 600)


@pytest.fixture(scope="module")
def entries(topo: Topology) -> list[bytes]:
    """Entries of every kind a campus holds: lane flows (set_field, NAT, conntrack matches with
    Nicira fields, meters, goto) and base flows (guards, table-miss)."""
    mods = flowmods(compile_lane(LANE, topo, NOW)) + flowmods(compile_base(topo))
    return [stats_entry(m, packets=2, octets=300) for m in mods]


def framed(body: bytes) -> bytes:
    """A message whose header length is its real length: what the reader hands on."""
    return struct.pack("!BBHI", 4, ofp.OFPT_MULTIPART_REPLY, 8 + len(body), 9) + body


def test_the_fixture_covers_the_decoders_slow_paths(entries: list[bytes]) -> None:
    raw = reply(entries)
    assert check_message(raw).ok
    decoded, _ = flowstats.decode_flow_stats_reply(raw)
    assert len(decoded) == len(entries)
    assert any("ct_state" in e.match for e in decoded)  # a Nicira match, parsed by os-ken
    assert any(
        type(a).__name__ == "OFPActionSetField"
        for e in decoded
        for i in e.instructions
        for a in getattr(i, "actions", ())
    )


class _Looping(BaseException):
    pass


def within(seconds: float, fn: Any, *args: Any) -> Any:
    """fn(*args), failing the test if it runs past ``seconds``: a timer signal interrupts a
    parser's loop on this (main) thread before it can eat the machine's memory (repeating
    every 50 ms, in case one lands where Python cannot raise it)."""
    done = []

    def stop(*_: Any) -> None:
        if not done:
            raise _Looping

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        try:
            return fn(*args)
        finally:
            done.append(True)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    except _Looping:
        raise AssertionError(f"still decoding after {seconds} s: {args[0].hex()}") from None


def length_fields(body: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every length field in a well-formed flow-stats body (after the 8-byte
    multipart header): entry, match, OXM, instruction and action lengths."""
    out = []
    pos = 8
    while pos < len(body):
        length = struct.unpack_from("!H", body, pos)[0]
        out.append((pos, 2))
        match_len = struct.unpack_from("!H", body, pos + 50)[0]
        out.append((pos + 50, 2))
        at = pos + 52
        while at < pos + 48 + match_len:
            out.append((at + 3, 1))
            at += 4 + body[at + 3]
        at = pos + 48 + (match_len + 7) // 8 * 8
        while at < pos + length:
            itype, ilen = struct.unpack_from("!HH", body, at)
            out.append((at + 2, 2))
            if itype in (ofp.OFPIT_APPLY_ACTIONS, ofp.OFPIT_WRITE_ACTIONS):
                out += action_length_fields(body, at + 8, at + ilen)
            at += ilen
        pos += length
    return out


def action_length_fields(body: bytes, at: int, end: int) -> list[tuple[int, int]]:
    """Action lengths, and those of the actions nested in a Nicira ct() (after its 24 bytes)."""
    out = []
    while at < end:
        atype, alen = struct.unpack_from("!HH", body, at)
        out.append((at + 2, 2))
        if atype == ofp.OFPAT_EXPERIMENTER and body[at + 4 : at + 10] == NX_CT:
            out += action_length_fields(body, at + 24, at + alen)
        at += alen
    return out


NX_CT = struct.pack("!IH", 0x2320, 35)  # Nicira experimenter id, NXAST_CT


def nests_in_ct(entry: bytes) -> bool:
    """Its first ct() carries actions (a commit; the lookup before it carries none)."""
    at = entry.find(NX_CT)
    return at >= 0 and struct.unpack_from("!H", entry, at - 2)[0] > 24


def test_the_mutations_reach_the_actions_nested_in_ct(entries: list[bytes]) -> None:
    nested = [e for e in entries if nests_in_ct(e) and len(length_fields(reply([e])[8:])) > 0]
    assert nested, "no ct() in the fixture"
    body = reply(nested[:1])[8:]
    ct_at = body.index(NX_CT) - 4
    assert any(at > ct_at + 24 for at, _ in length_fields(body))


@given(data=st.data())
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_what_the_decoder_accepts_the_guard_accepts(entries: list[bytes], data) -> None:
    picked = data.draw(st.lists(st.sampled_from(entries), min_size=1, max_size=3))
    body = bytearray(reply(picked)[8:])
    fields = length_fields(bytes(body))
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["length", "length", "byte", "cut", "grow"]))
        if how == "length":  # a length field set near, or far from, its true value
            at, size = data.draw(st.sampled_from(fields))
            if at + size > len(body):
                continue
            old = int.from_bytes(body[at : at + size], "big")
            new = data.draw(
                st.sampled_from([0, 1, 4, 8, 0xFF, 0xFFFF]) | st.integers(-16, 16).map(lambda d, old=old: old + d)
            )
            body[at : at + size] = (new % (1 << (8 * size))).to_bytes(size, "big")
        elif not body:
            break
        elif how == "byte":
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del body[data.draw(st.integers(0, len(body) - 1)) :]
        else:
            at = data.draw(st.integers(0, len(body)))
            body[at:at] = bytes(data.draw(st.integers(1, 16)))
    if len(body) < 8:
        return
    raw = framed(bytes(body))
    decoded = within(0.5, flowstats.decode_flow_stats_reply, raw)  # must not raise or loop
    if decoded is not None:
        verdict = check_message(raw)
        assert verdict.ok, f"decoded {len(decoded[0])} entries the guard says {verdict}"


def _first_instruction_at(entry: bytes) -> int:
    match_len = struct.unpack_from("!H", entry, 50)[0]
    return 48 + (match_len + 7) // 8 * 8


@pytest.mark.parametrize("where", ["entry", "oxm", "instruction", "action"])
def test_a_zero_length_anywhere_is_turned_down_for_the_guard_to_reject(entries: list[bytes], where: str) -> None:
    """Each length os-ken's parser would trust, set to 0 (its thread would spin forever), in an
    entry whose other copies the decoder has already seen (its caches are warm)."""
    with_actions = next(
        e
        for e in entries
        if len(e) > _first_instruction_at(e) + 8
        and struct.unpack_from("!H", e, _first_instruction_at(e))[0] == ofp.OFPIT_APPLY_ACTIONS
    )
    assert flowstats.decode_flow_stats_reply(reply([with_actions])) is not None  # warm
    bad = bytearray(with_actions)
    at = {
        "entry": 0,
        "oxm": 48 + 4 + 3,
        "instruction": _first_instruction_at(bad) + 2,
        "action": _first_instruction_at(bad) + 8 + 2,
    }[where]
    if where == "oxm":
        bad[at] = 0xFF  # an OXM longer than its match
    else:
        bad[at : at + 2] = b"\0\0"
    raw = reply([with_actions, bytes(bad)])
    assert flowstats.decode_flow_stats_reply(raw) is None
    assert check_message(raw).action == REJECT


def test_a_match_that_runs_past_its_entry_is_turned_down() -> None:
    """An entry of 56 bytes whose match (in_port only: 12 bytes, 16 padded) needs 64: the OXM's
    value lies past the end of the message."""
    header = struct.pack("!HBxIIHHHH4xQQQ", 56, 0, 0, 5, 100, 0, 0, 0, 0x42, 0, 0)
    whole_match = struct.pack("!HHIi4x", ofp.OFPMT_OXM, 12, ofp.OFPXMC_OPENFLOW_BASIC << 16 | 4, 3)
    ok = bytearray(header + whole_match)
    ok[0:2] = struct.pack("!H", 64)
    assert flowstats.decode_flow_stats_reply(reply([bytes(ok)])) is not None  # warm
    raw = reply([header + whole_match[:8]])
    assert flowstats.decode_flow_stats_reply(raw) is None
    assert check_message(raw).action == REJECT


def test_a_reply_that_is_not_a_whole_13_flow_stats_reply_is_turned_down(entries: list[bytes]) -> None:
    raw = reply(entries[:2])
    assert flowstats.decode_flow_stats_reply(raw) is not None
    assert flowstats.decode_flow_stats_reply(b"\x05" + raw[1:]) is None  # another version
    assert flowstats.decode_flow_stats_reply(raw[:-8]) is None  # header says more than framed
    assert flowstats.decode_flow_stats_reply(raw[:12]) is None


def test_an_action_of_length_0_inside_ct_is_turned_down(entries: list[bytes]) -> None:
    """os-ken keeps an unknown experimenter action's header length, so a nested one of length 0
    never advances its ct() list: the list grew until the machine ran out of memory (found by
    the property test above in a CI run)."""
    entry = bytearray(next(e for e in entries if nests_in_ct(e)))
    nested_at = entry.index(NX_CT) - 4 + 24
    struct.pack_into("!HHI", entry, nested_at, ofp.OFPAT_EXPERIMENTER, 0, 0x00D0F00D)
    raw = reply([bytes(entry)])
    assert within(0.5, flowstats.decode_flow_stats_reply, raw) is None
    assert check_message(raw).action == REJECT


def test_a_masked_set_field_is_turned_down_not_an_assertion(entries: list[bytes]) -> None:
    """Found by the property above in CI: a set-field action whose OXM has the mask bit (OpenFlow
    1.3 forbids it) made os-ken's OFPActionSetField assert, an AssertionError out of the decoder
    on the switch's connection thread. Now it is an entry we do not decode, like any other."""
    body = bytearray(reply(entries[:1])[8:])
    at = bytes(body).find(b"\x00\x19\x00\x10\x80\x00")  # a set-field action (eth_src, the lane's rewrite)
    assert at > 0
    body[at + 6 : at + 16] = b"\x01\x08" + (131072).to_bytes(4, "big") + (131073).to_bytes(4, "big")  # in_port/mask
    within(0.5, flowstats.decode_flow_stats_reply, framed(bytes(body)))  # no AssertionError
