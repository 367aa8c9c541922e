"""OpenFlow 1.3 match fields as the flow-table simulator (``flowsim``) reads them: each field's
width, the prerequisites OVS enforces (a match or set-field without them is rejected), the value a
packet that lacks a field matches as, and matches as ``(value, mask)`` conditions with the
"covers" relation that non-strict MODIFY and DELETE select by.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from tests.support.packets import Packet
from viplanes.controller.compile.flowkey import IPV4_FIELDS, IPV6_FIELDS, MAC_FIELDS


class FlowSimError(ValueError):
    """A message the simulated switch would answer with an OpenFlow error."""


FIELD_BITS = {
    "in_port": 32,
    "eth_type": 16,
    "ip_proto": 8,
    "arp_op": 16,
    **{f: 16 for f in ("tcp_src", "tcp_dst", "udp_src", "udp_dst")},
    "vlan_vid": 13,
    **{f: 8 for f in ("icmpv4_type", "icmpv4_code", "icmpv6_type", "icmpv6_code")},
    "tcp_flags": 16,
    "ip_dscp": 6,
    "ct_state": 32,
    "ct_mark": 32,
    **{f: 48 for f in MAC_FIELDS},
    **{f: 32 for f in IPV4_FIELDS},
    **{f: 128 for f in IPV6_FIELDS},
}
# field -> (required field, allowed values): OVS rejects a match or set-field without them
PREREQS: dict[str, tuple[str, tuple[int, ...]]] = {
    "ip_proto": ("eth_type", (0x0800, 0x86DD)),
    "ip_dscp": ("eth_type", (0x0800, 0x86DD)),
    **{f: ("eth_type", (0x0800,)) for f in ("ipv4_src", "ipv4_dst")},
    **{f: ("eth_type", (0x0806,)) for f in ("arp_op", "arp_spa", "arp_tpa", "arp_sha", "arp_tha")},
    **{f: ("ip_proto", (6,)) for f in ("tcp_src", "tcp_dst")},
    **{f: ("ip_proto", (17,)) for f in ("udp_src", "udp_dst")},
    "tcp_flags": ("ip_proto", (6,)),
    **{f: ("ip_proto", (1,)) for f in ("icmpv4_type", "icmpv4_code")},
    **{f: ("eth_type", (0x86DD,)) for f in ("ipv6_src", "ipv6_dst")},
    **{f: ("ip_proto", (58,)) for f in ("icmpv6_type", "icmpv6_code")},
    "ipv6_nd_target": ("icmpv6_type", (135, 136)),
}
# what a packet that does not carry the field matches as
DEFAULTS = {"vlan_vid": 0, "ct_state": 0, "ct_mark": 0, "ip_dscp": 0}
TCP_ACK = 0x010


def field_int(fieldname: str, value: Any) -> int:
    if fieldname in MAC_FIELDS:
        return int(str(value).replace(":", ""), 16)
    if fieldname in IPV4_FIELDS:
        return int(ipaddress.IPv4Address(value))
    if fieldname in IPV6_FIELDS:
        return int(ipaddress.IPv6Address(value))
    return int(value)


def packet_value(name: str, pkt: Packet, in_port: int) -> Any:
    if name == "in_port":
        return in_port
    if name == "tcp_flags" and "tcp_flags" not in pkt:
        return TCP_ACK
    return pkt.get(name, DEFAULTS.get(name))


# (value, mask) with all-ones mask for exact fields
Cond = tuple[int, int]


def conditions(match: Any) -> dict[str, Cond]:
    items = match.items() if hasattr(match, "items") else (match or {}).items()
    out: dict[str, Cond] = {}
    for name, value in items:
        full = (1 << FIELD_BITS.get(name, 64)) - 1
        if isinstance(value, tuple):
            v, m = field_int(name, value[0]), field_int(name, value[1])
            out[name] = (v & m, m)
        else:
            out[name] = (field_int(name, value), full)
    for name in out:
        need = PREREQS.get(name)
        if need and (need[0] not in out or out[need[0]][0] not in need[1]):
            raise FlowSimError(f"OFPBMC_BAD_PREREQ: match on {name} needs {need[0]} in {need[1]}")
    return out


def covers(general: dict[str, Cond], specific: dict[str, Cond]) -> bool:
    """Every packet matching ``specific`` also matches ``general`` (non-strict selection)."""
    for name, (v, m) in general.items():
        if name not in specific:
            return False
        sv, sm = specific[name]
        if sm & m != m or sv & m != v:
            return False
    return True
