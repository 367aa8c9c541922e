"""Watch flows: count one exact 5-tuple for a moment without changing where it goes. Pure.

Used to confirm a NAT mapping before a running connection is taken over (``viplanes.auto``):
sFlow samples are unauthenticated UDP, these counters come over the authenticated OpenFlow
channel. A watch flow sits at ``PRIORITY_WATCH`` (1), just above the table-miss, with the
table-miss's own action (NORMAL), so every flow of ours above it (guards, lanes, ARP, drops)
still wins and a packet that reaches it goes exactly where the table-miss would send it.

Its cookie carries the tag ``0x5657`` ("VW"), not the app's ``0x5650``: reconcile and the drift
probe (``ALL_APP_FLOWS``) never see it, and a hard timeout removes it should the controller die
between install and delete.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.base import PRIORITY_BYPASS_DROP, PRIORITY_TABLE_MISS
from viplanes.controller.compile.fastmatch import exact_match
from viplanes.domain.matches import ETH_TYPE, IP_PROTO
from viplanes.domain.values import FlowWatch

PRIORITY_WATCH = PRIORITY_TABLE_MISS + 1
WATCH_TAG = 0x5657 << 48
WATCH_MASK = 0xFFFF << 48
EXACT = 2**64 - 1
WATCH_HARD_TIMEOUT_S = 3  # the safety net: gone by itself if the delete never comes

assert PRIORITY_TABLE_MISS < PRIORITY_WATCH < PRIORITY_BYPASS_DROP  # below every band of ours


def watch_cookie(token: int) -> int:
    """The cookie of one watch (``token``: any 32-bit number the caller keeps unique)."""
    if not 0 <= token < 2**32:
        raise ValueError(f"watch token {token} is not 32 bits")
    return WATCH_TAG | token


def watch_match(w: FlowWatch) -> dict[str, Any]:
    proto = w.protocol
    return {
        "in_port": w.in_port,
        "eth_type": ETH_TYPE[4],
        "ip_proto": IP_PROTO[proto],
        "ipv4_src": w.src_ip,
        "ipv4_dst": w.dst_ip,
        f"{proto}_src": w.src_port,
        f"{proto}_dst": w.dst_port,
    }


def compile_watch(w: FlowWatch, cookie: int) -> Any:
    """The count-only flow: the watched tuple from its port, NORMAL like the table-miss."""
    return parser.OFPFlowMod(
        None,
        table_id=0,
        cookie=cookie,
        command=ofp.OFPFC_ADD,
        priority=PRIORITY_WATCH,
        idle_timeout=0,
        hard_timeout=WATCH_HARD_TIMEOUT_S,
        flags=0,
        buffer_id=ofp.OFP_NO_BUFFER,
        match=exact_match(watch_match(w)),
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(ofp.OFPP_NORMAL)])],
    )


def compile_watch_delete(cookie: int) -> Any:
    """Remove exactly that watch (by its cookie, in table 0)."""
    return parser.OFPFlowMod(
        None,
        table_id=0,
        cookie=cookie,
        cookie_mask=EXACT,
        command=ofp.OFPFC_DELETE,
        out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=parser.OFPMatch(),
    )


def packets_of(entries: list[Any] | None, cookie: int) -> int | None:
    """The watch's packet count from a flow-stats answer; None when the switch did not answer
    or the flow was not there (refused, or removed before it was read)."""
    if entries is None:
        return None
    counts = [e.packet_count for e in entries if e.cookie == cookie]
    return counts[0] if counts else None
