"""A small model of Open vSwitch connection tracking for ``flowsim``: enough to ask "is this
reply of a lane connection let through, is an inbound SYN dropped, does an ICMP error come back
un-NATed?".

Per switch: connections keyed by zone and their original / reply 5-tuples; ``ct()`` sets the
packet's ``ct_state`` (trk, new, est, rel, rpl) and ``ct_mark``; ``commit`` creates the
connection (with its source NAT and mark), ``nat`` applies the connection's translation to the
packet (and to the inner header of a related ICMP error). A connection is ``+est`` once a reply
was seen; a packet matching no connection is ``+new``, an ICMP error quoting one is ``+rel``.
Not modelled: timeouts, TCP window tracking (+inv), helpers (alg), port NAT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.conntrack import CT_EST, CT_INV, CT_NEW, CT_REL, CT_RPL, CT_TRK

Tuple5 = tuple[str, str, int, int, int]
ICMP_ERROR_TYPES = (3, 11)
ICMP6_ERROR_TYPES = (1, 2, 3)  # destination unreachable, packet too big, time exceeded


def five_tuple(fields: dict[str, Any]) -> Tuple5:
    proto = int(fields.get("ip_proto", 0))
    name = {6: "tcp", 17: "udp"}.get(proto)
    sport = int(fields.get(f"{name}_src", 0)) if name else 0
    dport = int(fields.get(f"{name}_dst", 0)) if name else 0
    ip = "ipv6" if "ipv6_src" in fields else "ipv4"
    return (str(fields.get(f"{ip}_src")), str(fields.get(f"{ip}_dst")), proto, sport, dport)


def swapped(t: Tuple5) -> Tuple5:
    return (t[1], t[0], t[2], t[4], t[3])


@dataclass
class Connection:
    zone: int
    orig: Tuple5  # as the first packet arrived (before NAT)
    reply: Tuple5  # what a reply looks like on the wire (after NAT)
    mark: int = 0
    snat: str | None = None
    replied: bool = False


@dataclass
class Conntrack:
    connections: list[Connection] = field(default_factory=list)
    # zone -> most entries it may hold (``ovs-appctl dpctl/ct-set-limits``): a commit beyond it
    # creates nothing, the packet stays ``+new`` untranslated with ct_mark 0, as in OVS
    limits: dict[int, int] = field(default_factory=dict)

    def flush(self, zone: int) -> None:
        """NXT_CT_FLUSH_ZONE: every entry of the zone goes."""
        self.connections = [c for c in self.connections if c.zone != zone]

    def count(self, zone: int) -> int:
        return sum(1 for c in self.connections if c.zone == zone)

    def _find(self, zone: int, t: Tuple5) -> tuple[Connection | None, bool]:
        for conn in self.connections:
            if conn.zone == zone and conn.orig == t:
                return conn, False
            if conn.zone == zone and conn.reply == t:
                return conn, True
        return None, False

    def execute(self, pkt: dict[str, Any], action: Any) -> dict[str, Any]:
        """The packet after ``ct(...)`` (an os-ken NXActionCT): ct_state/ct_mark set, NAT'd."""
        if pkt.get("eth_type") not in (0x0800, 0x86DD):
            return {**pkt, "ct_state": CT_TRK | 0x10}  # +inv: not IP
        zone = action.zone_ofs_nbits if not action.zone_src else 0
        nat = next((a for a in action.actions if type(a).__name__ == "NXActionNAT"), None)
        mark = next(
            (a.value for a in action.actions if isinstance(a, parser.OFPActionSetField) and a.key == "ct_mark"), None
        )
        commit = bool(action.flags & 1)
        out = dict(pkt)
        t = five_tuple(pkt)
        conn, is_reply = self._find(zone, t)
        related = None
        inner = pkt.get("icmp_inner")
        is_error = (pkt.get("ip_proto") == 1 and pkt.get("icmpv4_type") in ICMP_ERROR_TYPES) or (
            pkt.get("ip_proto") == 58 and pkt.get("icmpv6_type") in ICMP6_ERROR_TYPES
        )
        if conn is None and is_error and isinstance(inner, dict):
            related, _ = self._find(zone, swapped(five_tuple(inner)))
        if conn is not None:
            if is_reply:
                conn.replied = True
            state = CT_TRK | (CT_EST if conn.replied else CT_NEW) | (CT_RPL if is_reply else 0)
        elif related is not None:
            state = CT_TRK | CT_REL | CT_RPL
        elif _invalid_new(pkt):
            return {**out, "ct_state": CT_TRK | CT_INV, "ct_mark": 0}  # no commit, no NAT
        else:
            state = CT_TRK | CT_NEW
        full = zone in self.limits and self.count(zone) >= self.limits[zone]
        if commit and conn is None and related is None and full:
            return {**out, "ct_state": state, "ct_mark": 0}
        if commit and conn is None and related is None:
            snat = nat.range_ipv4_min if nat is not None and nat.flags & 1 else None
            after = (snat or t[0],) + t[1:]
            conn = Connection(zone, t, swapped(after), snat=snat or None)  # type: ignore[arg-type]
            self.connections.append(conn)
        if commit and conn is not None and mark is not None:
            conn.mark = int(mark)
        owner = conn or related
        out["ct_state"], out["ct_mark"] = state, owner.mark if owner else 0
        if nat is not None and owner is not None and owner.snat:
            if related is not None:  # outer destination and the quoted source go back
                out["ipv4_dst"] = related.orig[0]
                quoted = dict(inner)  # type: ignore[arg-type]
                out["icmp_inner"] = {**quoted, "ipv4_src": related.orig[0]}
            elif is_reply:
                out["ipv4_dst"] = owner.orig[0]
            else:
                out["ipv4_src"] = owner.snat
        return out


TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK, TCP_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def _invalid_new(pkt: dict[str, Any]) -> bool:
    """A TCP packet that cannot open a connection, as OVS's userspace conntrack judges it
    (lib/conntrack-tcp.c: invalid flag sets, and a SYN-ACK opens nothing): +inv, never committed."""
    if pkt.get("ip_proto") != 6 or "tcp_flags" not in pkt:
        return False
    f = int(pkt["tcp_flags"])
    if f & TCP_SYN and f & (TCP_RST | TCP_FIN):
        return True
    if not f & TCP_SYN and not f & (TCP_ACK | TCP_RST):
        return True
    if not f & TCP_ACK and f & (TCP_FIN | TCP_PSH | TCP_URG):
        return True
    return bool(f & TCP_SYN and f & TCP_ACK)
