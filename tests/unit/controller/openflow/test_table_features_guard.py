"""Table- and meter-features replies (asked at connect, issue 31) pass the guard only when every
entry, property and id inside them is framed within its container: os-ken's parser loops for
ever on an instruction id of length 0, and a switch is an attacker here (issue 7)."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp

from tests.support.rawof import FakeDatapath
from tests.unit.controller.openflow.test_app_guard import os_ken_hangs_on, parses_in_time
from viplanes.controller.openflow.guard import OK, REJECT, check_message
from viplanes.controller.runtime.switchfacts import parse_meter_features, parse_table_features


def prop(ptype: int, body: bytes) -> bytes:
    length = 4 + len(body)
    return struct.pack("!HH", ptype, length) + body + b"\0" * ((length + 7) // 8 * 8 - length)


def entry(table_id: int, max_entries: int, inst_len: int = 4) -> bytes:
    props = (
        prop(ofp.OFPTFPT_INSTRUCTIONS, struct.pack("!HH", ofp.OFPIT_GOTO_TABLE, inst_len))
        + prop(ofp.OFPTFPT_NEXT_TABLES, bytes([table_id + 1]))
        + prop(ofp.OFPTFPT_MATCH, struct.pack("!II", 0x80000004, 0xFFFF0208) + b"\0\0\0\x01")  # in_port + exp.
    )
    name = f"table{table_id}".encode().ljust(ofp.OFP_MAX_TABLE_NAME_LEN, b"\0")
    head = struct.pack(ofp.OFP_TABLE_FEATURES_PACK_STR, 64 + len(props), table_id, name, 0, 0, 0, max_entries)
    return head + props


def multipart(mp_type: int, body: bytes, flags: int = 0) -> bytes:
    return struct.pack("!BBHIHH4x", 4, ofp.OFPT_MULTIPART_REPLY, 16 + len(body), 7, mp_type, flags) + body


TABLES = multipart(ofp.OFPMP_TABLE_FEATURES, entry(0, 1000) + entry(1, 0xFFFFFFFF))
METERS = multipart(ofp.OFPMP_METER_FEATURES, struct.pack("!IIIBB2x", 200000, 0x3, 0xF, 1, 1))


def test_valid_replies_pass_and_os_ken_reads_them() -> None:
    for raw in (TABLES, METERS):
        assert check_message(raw).action == OK, check_message(raw).reason
    tables = ofproto_parser.msg(FakeDatapath(), 4, ofp.OFPT_MULTIPART_REPLY, len(TABLES), 7, TABLES)
    assert parse_table_features(tables.body) == (2, {0: 1000, 1: 0xFFFFFFFF})
    meters = ofproto_parser.msg(FakeDatapath(), 4, ofp.OFPT_MULTIPART_REPLY, len(METERS), 7, METERS)
    assert parse_meter_features(meters.body) == 200000


def test_an_instruction_id_of_length_zero_is_rejected_before_os_ken_loops_on_it() -> None:
    """The attack: a table-features reply whose instruction id says length 0. os-ken's parser
    never advances and grows its list until memory runs out."""
    raw = multipart(ofp.OFPMP_TABLE_FEATURES, entry(0, 1000, inst_len=0))
    assert os_ken_hangs_on(raw)
    verdict = check_message(raw)
    assert verdict.action == REJECT and "table-feature id" in verdict.reason


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(16, len(TABLES) - 1), st.integers(0, 255))
def test_whatever_the_guard_passes_os_ken_parses_in_time(at: int, value: int) -> None:
    raw = bytearray(TABLES)
    raw[at] = value
    if check_message(bytes(raw)).ok:
        assert parses_in_time(bytes(raw))


def test_an_empty_meter_features_reply_passes() -> None:
    """A switch without meters may answer with no body; closing its connection for that would
    take it off the campus."""
    assert check_message(multipart(ofp.OFPMP_METER_FEATURES, b"")).action == OK
    assert check_message(multipart(ofp.OFPMP_METER_FEATURES, b"\0" * 10)).action == REJECT
