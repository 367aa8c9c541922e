"""tablesizes reads each table's id and size from a table-features reply without os-ken's parser
(which took the lab's switches past the 5 s ask at connect): the same numbers os-ken reads, the
``more`` flag kept, and nothing the guard would not pass (a switch is an attacker here)."""

from __future__ import annotations

import struct
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp

from tests.support.rawof import FakeDatapath
from tests.unit.controller.openflow.test_table_features_guard import entry, multipart, prop
from viplanes.controller.openflow.guard import check_message
from viplanes.controller.openflow.server import GuardedDatapath
from viplanes.controller.openflow.tablesizes import TableSize, decode_table_features_reply
from viplanes.controller.runtime.switchfacts import parse_table_features

_IDS = (ofp.OFPTFPT_INSTRUCTIONS, ofp.OFPTFPT_WRITE_ACTIONS, ofp.OFPTFPT_APPLY_ACTIONS)
_OXMS = (ofp.OFPTFPT_MATCH, ofp.OFPTFPT_WILDCARDS, ofp.OFPTFPT_WRITE_SETFIELD, ofp.OFPTFPT_APPLY_SETFIELD)


def ovs_like_entry(table_id: int, max_entries: int) -> bytes:
    """One table as OVS 3.1 describes it: every id list twice (hit and miss), 40 OXM ids per
    match-like list, 17 action ids, the next 253 tables."""
    ids = b"".join(struct.pack("!HH", i, 4) for i in range(17))
    oxms = b"".join(struct.pack("!I", 0x80000000 | f << 9 | 4) for f in range(40))
    props = b"".join(prop(t, ids) + prop(t + 1, ids) for t in _IDS)
    props += prop(ofp.OFPTFPT_NEXT_TABLES, bytes(range(1, 254))) + prop(ofp.OFPTFPT_NEXT_TABLES_MISS, bytes([1]))
    props += b"".join(prop(t, oxms) for t in _OXMS)
    props += prop(ofp.OFPTFPT_WRITE_SETFIELD_MISS, oxms) + prop(ofp.OFPTFPT_APPLY_SETFIELD_MISS, oxms)
    name = f"table{table_id}".encode().ljust(ofp.OFP_MAX_TABLE_NAME_LEN, b"\0")
    head = struct.pack(ofp.OFP_TABLE_FEATURES_PACK_STR, 64 + len(props), table_id, name, 0, 0, 3, max_entries)
    return head + props


PART = multipart(
    ofp.OFPMP_TABLE_FEATURES,
    b"".join(ovs_like_entry(t, 1_000_000 - t) for t in range(12, 24)),
    flags=ofp.OFPMPF_REPLY_MORE,
)


def test_the_numbers_are_os_kens() -> None:
    assert check_message(PART).ok
    tables, more = decode_table_features_reply(PART) or ([], False)
    theirs = ofproto_parser.msg(FakeDatapath(), 4, ofp.OFPT_MULTIPART_REPLY, len(PART), 7, PART)
    assert parse_table_features(tables) == parse_table_features(theirs.body)
    assert tables[0] == TableSize(12, 1_000_000 - 12) and len(tables) == 12
    assert more is True and bool(theirs.flags & ofp.OFPMPF_REPLY_MORE)
    last = multipart(ofp.OFPMP_TABLE_FEATURES, entry(253, 5))
    assert decode_table_features_reply(last) == ([TableSize(253, 5)], False)


def test_other_messages_are_left_to_the_guard_and_os_ken() -> None:
    meters = multipart(ofp.OFPMP_METER_FEATURES, struct.pack("!IIIBB2x", 200000, 0x3, 0xF, 1, 1))
    zero_id = multipart(ofp.OFPMP_TABLE_FEATURES, entry(0, 1000, inst_len=0))  # os-ken loops on it
    for raw in (meters, zero_id, PART[:-8], PART[:2] + struct.pack("!H", len(PART) + 8) + PART[4:]):
        assert decode_table_features_reply(raw) is None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 16 + 64 + 200), st.integers(0, 255))
def test_whatever_it_decodes_the_guard_passes(at: int, value: int) -> None:
    raw = bytearray(multipart(ofp.OFPMP_TABLE_FEATURES, ovs_like_entry(0, 10) + entry(1, 20)))
    raw[at] = value
    if decode_table_features_reply(bytes(raw)) is not None:
        assert check_message(bytes(raw)).ok


def test_the_connection_hands_a_table_answer_to_the_runtime_undecoded_by_os_ken() -> None:
    """The connection's fast path (``GuardedDatapath._fast_flow_stats``) takes table-features
    parts as it takes flow stats: straight to the runtime's ``on_flow_stats``, by xid."""
    heard: list[tuple[int, int, list, bool]] = []
    conn = SimpleNamespace(flow_stats_hook=lambda *args: heard.append(args), id=3)
    assert GuardedDatapath._fast_flow_stats(conn, PART)  # type: ignore[arg-type]
    assert [(d, x, len(t), m) for d, x, t, m in heard] == [(3, 7, 12, True)]
