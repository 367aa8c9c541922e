"""Decode OpenFlow 1.3 table-features replies straight from the wire: each table's id and size.

OVS answers OFPMP_TABLE_FEATURES for 254 tables in ~21 parts of ~12 tables, each table carrying
its match, instruction, action and set-field lists. os-ken's parser builds an object for every id
in those lists; with four switches connecting at once on this machine that took more than 5 s of
the connection threads' time, so the ask at connect (``runtime/switchfacts.py``) gave up before
the last part came, no switch's tables were ever learned, and every reconcile read-back in the
same seconds waited behind the parsing. The controller reads two numbers per table, so
this reads those and walks the rest only as far as ``guard.check_table_features`` does: whatever
it accepts, the guard accepts (``tests/unit/controller/openflow/test_table_sizes.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.controller.openflow import guard
from viplanes.controller.openflow.flowstats import multipart_reply_head

_HEAD = struct.Struct("!HB5x32sQQII")  # ofp_table_features up to its properties (64 bytes)


@dataclass(frozen=True)
class TableSize:
    """The two fields of ``OFPTableFeaturesStats`` the controller reads (``parse_table_features``)."""

    table_id: int
    max_entries: int


def decode_table_features_reply(raw: bytes) -> tuple[list[TableSize], bool] | None:
    """(tables, more) of one OFPMP_TABLE_FEATURES multipart reply (``raw``: one whole message);
    None for any other message or one the guard would not pass (it then decides, with its reason)."""
    head = multipart_reply_head(raw)
    if head is None:
        return None
    mp_type, flags = head
    end = len(raw)
    if mp_type != ofp.OFPMP_TABLE_FEATURES:
        return None
    try:
        guard.check_table_features(raw, ofp.OFP_MULTIPART_REPLY_SIZE, end)
    except (guard.Malformed, struct.error, IndexError):
        return None
    tables = []
    pos = ofp.OFP_MULTIPART_REPLY_SIZE
    while pos < end:  # every length checked above
        length, table_id, _name, _match, _write, _config, max_entries = _HEAD.unpack_from(raw, pos)
        tables.append(TableSize(table_id, max_entries))
        pos += length
    return tables, bool(flags & ofp.OFPMPF_REPLY_MORE)
