"""Exact OFPMatches built without os-ken's per-field conversions.

``OFPMatch(**fields)`` normalises every value through os-ken's OXM tables (~0.1-0.4 ms a
match); lanes (thousands) and the host source guards (hosts x host ports per switch: tens of
thousands of matches on a campus of 128 access switches) are built from values that are already
canonical, so they put the fields in os-ken's own order directly. Pure; shared by ``compiler``
(lanes) and ``guardflows`` (base flows).
"""
from __future__ import annotations

from typing import Any

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

_FIELD_CACHE_MAX = 1 << 16
_encoded: dict[tuple[str, Any], bytes] = {}  # (field, user value) -> os-ken's OXM TLV bytes


def _oxm(name: str, value: Any) -> bytes:
    """One field's OXM TLV exactly as os-ken encodes it, kept per (field, value): lanes repeat
    most of their fields (ether type, ports, the host's and the lane's addresses, the lane MAC),
    and os-ken's generic encoder was ~40 % of serialising an activation's flow-mods."""
    key = (name, value)
    try:
        found = _encoded.get(key)
    except TypeError:  # an unhashable value (a list): encode it every time
        found, key = None, None  # type: ignore[assignment]
    if found is None:
        n, v, m = ofp.oxm_from_user(name, value)
        out = bytearray()
        ofp.oxm_serialize(n, v, m, out, 0)
        found = bytes(out)
        if key is not None:
            if len(_encoded) >= _FIELD_CACHE_MAX:
                _encoded.clear()
            _encoded[key] = found
    return found


class PackedMatch(parser.OFPMatch):  # type: ignore[misc]
    """An OFPMatch whose fields serialise from ``_oxm``'s cache: the same bytes as os-ken's
    (``tests/unit/test_fastmatch.py`` compares them on every lane shape and campus)."""

    def serialize(self, buf: bytearray, offset: int) -> int:
        if self._composed_with_old_api():
            return int(super().serialize(buf, offset))
        body = b"".join([_oxm(k, uv) for k, uv in self._fields2])
        length = 4 + len(body)
        pad = -length % 8
        msg_pack_into(f"!HH{len(body)}s{pad}x", buf, offset, ofp.OFPMT_OXM, length, body)
        self.length = length
        return length + pad

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
        return PackedMatch(**fields)
    ordered = sorted(fields.items(), key=lambda kv: _OXM_ORDER[kv[0]])
    return PackedMatch(_ordered_fields=[(k, v.lower() if k.startswith("eth_") and
                                             isinstance(v, str) else v) for k, v in ordered])
