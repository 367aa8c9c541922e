"""Watch flows: count one exact 5-tuple for a moment without changing where it goes. Pure.

Used to confirm a NAT mapping before a running connection is taken over (``viplanes.auto``):
sFlow samples are unauthenticated UDP, these counters come over the authenticated OpenFlow
channel. A watch flow sits at ``PRIORITY_WATCH`` (2; a sweep of any source port at 1), just above the table-miss, with the
table-miss's own action (NORMAL), so every flow of ours above it (guards, lanes, ARP, drops)
still wins and a packet that reaches it goes exactly where the table-miss would send it.

A marked watch (``FlowWatch.mark``) also matches one DSCP value and rewrites it (set_field
``ip_dscp``: the six DSCP bits only, ECN kept): the access switch marks a connection's packets
with a nonce, the border counts the nonce on the proposed post-NAT tuple and puts the original
DSCP back, so the far end sees the packets as they were sent (docs/automatic-lanes.md).

Its cookie carries the tag ``0x5657`` ("VW"), not the app's ``0x5650``: reconcile and the drift
probe (``ALL_APP_FLOWS``) never see it, and a hard timeout removes it should the controller die
between install and delete.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.base import PRIORITY_BYPASS_DROP, PRIORITY_TABLE_MISS
from viplanes.controller.compile.fastmatch import PackedSetField, exact_match
from viplanes.domain.matches import ETH_TYPE, IP_PROTO
from viplanes.domain.values import FlowWatch

PRIORITY_SWEEP = PRIORITY_TABLE_MISS + 1  # a watch of any source port (FlowWatch.src_port None)
PRIORITY_WATCH = PRIORITY_SWEEP + 1
PRIORITY_UNMARK = PRIORITY_WATCH + 1  # over a marking watch: its connection passes unmarked
WATCH_TAG = 0x5657 << 48
WATCH_MASK = 0xFFFF << 48
EXACT = 2**64 - 1
WATCH_HARD_TIMEOUT_S = 4  # the safety net: gone by itself if the delete never comes
DSCP_MAX = 63

assert PRIORITY_TABLE_MISS < PRIORITY_SWEEP < PRIORITY_WATCH < PRIORITY_UNMARK < PRIORITY_BYPASS_DROP  # below ours


def watch_cookie(token: int) -> int:
    """The cookie of one watch (``token``: any 32-bit number the caller keeps unique)."""
    if not 0 <= token < 2**32:
        raise ValueError(f"watch token {token} is not 32 bits")
    return WATCH_TAG | token


def watch_match(w: FlowWatch) -> dict[str, Any]:
    proto = w.protocol
    match: dict[str, Any] = {
        "in_port": w.in_port,
        "eth_type": ETH_TYPE[4],
        "ip_proto": IP_PROTO[proto],
        "ipv4_src": w.src_ip,
        "ipv4_dst": w.dst_ip,
        f"{proto}_dst": w.dst_port,
    }
    if w.src_port is not None:
        match[f"{proto}_src"] = w.src_port
    if w.mark is not None:
        match["ip_dscp"] = w.mark.match_dscp
    return match


def watch_actions(w: FlowWatch) -> list[Any]:
    """NORMAL like the table-miss, after the DSCP rewrite of a marked watch."""
    if w.mark is not None and not (0 <= w.mark.match_dscp <= DSCP_MAX and 0 <= w.mark.set_dscp <= DSCP_MAX):
        raise ValueError(f"watch mark {w.mark} is not two DSCP values (0..63)")
    rewrite = [PackedSetField(ip_dscp=w.mark.set_dscp)] if w.mark is not None else []
    return [*rewrite, parser.OFPActionOutput(ofp.OFPP_NORMAL)]


def compile_watch(w: FlowWatch, cookie: int, hard_timeout: int = WATCH_HARD_TIMEOUT_S) -> Any:
    """The watch flow: the watched tuple from its port (and DSCP, when marked), NORMAL like the
    table-miss. ``hard_timeout``: a restoring watch outlives the marking one (watching.py)."""
    return parser.OFPFlowMod(
        None,
        table_id=0,
        cookie=cookie,
        command=ofp.OFPFC_ADD,
        priority=PRIORITY_WATCH if w.src_port is not None else PRIORITY_SWEEP,
        idle_timeout=0,
        hard_timeout=hard_timeout,
        flags=0,
        buffer_id=ofp.OFP_NO_BUFFER,
        match=exact_match(watch_match(w)),
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, watch_actions(w))],
    )


def compile_unmark(w: FlowWatch, cookie: int, hard_timeout: int = WATCH_HARD_TIMEOUT_S) -> Any:
    """Over the marking watch ``w``, the same match and NORMAL without the rewrite: nothing more
    is marked, and the marking watch's counter stops where it is, so it can be read complete
    once the packets it marked have come out at the border (``watching.py``'s drain)."""
    if w.mark is None:
        raise ValueError("only a marking watch is unmarked")
    return parser.OFPFlowMod(
        None,
        table_id=0,
        cookie=cookie,
        command=ofp.OFPFC_ADD,
        priority=PRIORITY_UNMARK,
        idle_timeout=0,
        hard_timeout=hard_timeout,
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
