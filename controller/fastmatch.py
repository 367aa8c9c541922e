"""Exact OFPMatches built without os-ken's per-field conversions.

``OFPMatch(**fields)`` normalises every value through os-ken's OXM tables (~0.1-0.4 ms a
match); lanes (thousands) and the host source guards (hosts x host ports per switch: tens of
thousands of matches on a campus of 128 access switches) are built from values that are already
canonical, so they put the fields in os-ken's own order directly. Pure; shared by ``compiler``
(lanes) and ``guardflows`` (base flows).
"""
from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

# The order os-ken itself puts match fields in (by OXM field number), read from os-ken once.
_OXM_ORDER = {name: i for i, (name, _) in enumerate(parser.OFPMatch(
    in_port=1, eth_dst="02:00:00:00:00:01", eth_src="02:00:00:00:00:02", eth_type=0x0800,
    vlan_vid=0, ip_proto=6, ipv4_src="10.0.0.1", ipv4_dst="10.0.0.2", tcp_src=1, tcp_dst=2,
    udp_src=3, udp_dst=4, arp_op=1, arp_spa="10.0.0.3", arp_tpa="10.0.0.4")._fields2)}


def exact_match(fields: dict[str, Any]) -> Any:
    """An OFPMatch of exact fields, identical to ``OFPMatch(**fields)``. Values must be
    canonical: ints, dotted IPv4 strings, MACs (lower-cased here). Fields os-ken orders
    elsewhere (conntrack, tcp_flags, masks) go through OFPMatch itself."""
    if any(k not in _OXM_ORDER or isinstance(v, tuple) for k, v in fields.items()):
        return parser.OFPMatch(**fields)
    ordered = sorted(fields.items(), key=lambda kv: _OXM_ORDER[kv[0]])
    return parser.OFPMatch(_ordered_fields=[(k, v.lower() if k.startswith("eth_") and
                                             isinstance(v, str) else v) for k, v in ordered])
