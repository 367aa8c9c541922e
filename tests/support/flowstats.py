"""Flow-stats replies as a switch sends them, built from the flow-mods that installed the flows
(the reconcile and flow-stats guard tests)."""

from __future__ import annotations

import struct

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.rawof import FakeDatapath

NOW = 3_000_000.0


def stats_entry(mod: parser.OFPFlowMod, packets: int = 0, octets: int = 0) -> bytes:
    """The flow-stats entry a switch would report for a FlowMod we sent (same match/instructions)."""
    mod.datapath = FakeDatapath()
    mod.xid = 1
    mod.serialize()
    body = bytes(mod.buf[48:])  # ofp_flow_mod's match and instructions
    return (
        struct.pack(
            "!HBxIIHHHH4xQQQ",
            48 + len(body),
            mod.table_id,
            0,
            5,
            mod.priority,
            0,
            mod.hard_timeout,
            mod.flags,
            mod.cookie,
            packets,
            octets,
        )
        + body
    )


def reply(entries: list[bytes], more: bool = False) -> bytes:
    body = struct.pack("!HH4x", ofp.OFPMP_FLOW, ofp.OFPMPF_REPLY_MORE if more else 0)
    body += b"".join(entries)
    return struct.pack("!BBHI", 4, ofp.OFPT_MULTIPART_REPLY, 8 + len(body), 9) + body


def flowmods(ofmsgs_by_dpid: dict) -> list:
    return [m for msgs in ofmsgs_by_dpid.values() for m in msgs if isinstance(m, parser.OFPFlowMod)]
