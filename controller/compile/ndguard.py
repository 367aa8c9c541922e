"""IPv6 first-hop security from the topology: RA guard and ND inspection (RFC 6105, RFC 7113).

IPv6's ARP is ICMPv6, so the IPv4 source guards (``hostguard.host_source_guards``) leave it open: a
campus host's neighbour advertisement or solicitation claiming the desktop's v6 gateway moves
the desktop's traffic to that host, and a router advertisement from any host installs a default
route on every host that accepts RAs. These flows close that on every campus switch (table 0,
between the source guards at ``PRIORITY_GUARD`` and the table-miss NORMAL):

- ``PRIORITY_ND_TRUSTED`` (890, NORMAL): router advertisements (134) and redirects (137) from
  router ports (the middlebox legs and the edge router's inside leg attached here); every ND
  message from a trunk port (a non-bypass link to another campus switch: ND entering the campus
  is inspected on the switch where it entered); and a protected address's own claims (below)
  from its owner's port.
- ``PRIORITY_ND_CLAIM`` (880, drop): a claim of a protected address from any other port. A claim
  is an NA whose target is the address, or an NS whose source is it (the source's link-layer
  option would bind it in the receiver's cache); an NA's own source binds nothing, so only the
  host rules below check it. Protected: every v6 address of a middlebox leg, the edge router's
  inside leg and a campus host in the topology, and the link-local address Linux derives from
  each one's MAC (EUI-64; a device using other link-local addresses is covered by its global
  ones only). A leg cabled straight to another node (no switch port) makes no claim on a
  switch, so claims of its addresses are dropped everywhere. A host's ``gateway6`` that is no
  device's address has no known port: its claims are dropped on the campus hosts' ports.
- ``PRIORITY_ND_HOST`` (870, NORMAL) / ``PRIORITY_ND_HOST_DROP`` (860, drop), dual-stack
  campuses: a host may claim only its own addresses. From a campus host's port an NS passes when
  its source is the host's v6 address, a link-local address or ``::`` (duplicate address
  detection); an NA when its source and target are each the host's address or link-local; any
  other NS or NA is dropped there.
- ``PRIORITY_RA_DROP`` (850, drop): RAs and redirects from every other port (host ports and ports
  the topology does not know: RFC 6105's default deny); and an IPv6 packet whose header chain
  Open vSwitch could not walk (it reports ``ip_proto`` 0): RFC 7113's evasion, a first fragment
  holding only extension headers with the ICMPv6 header in a later fragment. OVS walks complete
  chains (hop-by-hop, destination options, routing, a first fragment) and matches the ICMPv6
  type behind them, so an RA behind a destination-options header meets the drop above; a
  later fragment alone cannot be reassembled without its dropped first one (RFC 7112 requires
  the whole chain in the first fragment).

Only messages that claim or route are checked: router solicitations, MLD and NS for another
host's address (resolution) keep the normal path. The switches beyond the edge router (the
internet side) get none of this, like the other source guards.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.cookies import BASE_COOKIE
from viplanes.controller.compile.flowkey import cached_key
from viplanes.topologies.model import Interface, PortRef, Topology

PRIORITY_ND_TRUSTED = 890
PRIORITY_ND_CLAIM = 880
PRIORITY_ND_HOST = 870
PRIORITY_ND_HOST_DROP = 860
PRIORITY_RA_DROP = 850
ETH_TYPE_IPV6 = 0x86DD
IP_PROTO_ICMPV6 = 58
IP_PROTO_UNWALKED = 0  # what OVS reports for a v6 header chain it could not parse to its end
ND_RS, ND_RA, ND_NS, ND_NA, ND_REDIRECT = 133, 134, 135, 136, 137
ROUTER_ONLY = (ND_RA, ND_REDIRECT)
LINK_LOCAL = ("fe80::", "ffc0::")  # fe80::/10
UNSPECIFIED = "::"

OFMsgs = list[Any]
Fields = dict[str, Any]  # OpenFlow match fields, as OFPMatch takes them


@dataclass(frozen=True)
class Claimed:
    """A protected v6 address and the port of the device that owns it (None: no switch port).
    ``held``: some device of the topology holds it (False: a host's gateway6 and nothing else)."""

    address: str
    owner: PortRef | None
    held: bool = True


def eui64_link_local(mac: str) -> str:
    """The link-local address a Linux interface with this MAC takes by default (RFC 4291 EUI-64)."""
    raw = bytearray(bytes.fromhex(mac.replace(":", "")))
    raw[0] ^= 0x02
    packed = b"\xfe\x80" + bytes(6) + bytes(raw[:3]) + b"\xff\xfe" + bytes(raw[3:])
    return str(ipaddress.IPv6Address(packed))


def _legs(topo: Topology) -> list[Interface]:
    """Router-like legs: they forward other hosts' traffic and may advertise routes."""
    return [topo.edge.inside] + [leg for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]


def router_ports(topo: Topology) -> set[PortRef]:
    """Where a router, middlebox or the edge router's inside leg plugs into a campus switch."""
    return {leg.attach for leg in _legs(topo) if leg.attach is not None}


def trunk_ports(topo: Topology) -> set[PortRef]:
    """Both ends of every non-bypass link (the bypass carries lanes only and drops the rest)."""
    return {end for link in topo.links if not link.bypass for end in (link.a, link.b)}


def host_ports(topo: Topology) -> dict[PortRef, Interface]:
    """Campus hosts' ports and their interfaces (cloud hosts are beyond the edge)."""
    return {h.iface.attach: h.iface for h in topo.hosts if h.role != "cloud" and h.iface.attach}


@functools.lru_cache(maxsize=8)
def protected(topo: Topology) -> tuple[Claimed, ...]:
    """Every topology v6 address a claim could steal, once, with its owner's port (once per
    topology: every switch's flows need it)."""
    out: dict[str, Claimed] = {}
    devices = _legs(topo) + list(host_ports(topo).values())
    for iface in devices:
        if iface.ip6 is None:
            continue
        for address in (str(iface.ip6.ip), eui64_link_local(iface.mac)):
            out.setdefault(address, Claimed(address, iface.attach))
    for host in topo.hosts:
        if host.gateway6 is not None and host.role != "cloud":
            out.setdefault(str(host.gateway6), Claimed(str(host.gateway6), None, held=False))
    return tuple(out.values())


# Built once per process and copied per switch, as base.py's host guards: every switch of a
# dual-stack campus drops the same claims (a 16-access-switch campus of 260 v6 hosts: 24,613
# flow-mods, 3.8 s to build each afresh).
_KEPT: dict[tuple[int, bool, tuple[tuple[str, Any], ...]], Any] = {}
_KEPT_MAX = 200_000


def _flow(priority: int, fields: Fields, forward: bool) -> Any:
    """A fresh ADD (NORMAL, or drop): a shallow copy of the kept one, its flow key included."""
    key = (priority, forward, tuple(sorted(fields.items())))
    kept = _KEPT.get(key)
    if kept is None:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        actions = [parser.OFPActionOutput(ofp.OFPP_NORMAL)] if forward else []
        kept = parser.OFPFlowMod(
            None,
            table_id=0,
            cookie=BASE_COOKIE,
            command=ofp.OFPFC_ADD,
            priority=priority,
            match=parser.OFPMatch(**fields),
            instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else [],
            buffer_id=ofp.OFP_NO_BUFFER,
        )
        cached_key(kept)
        _KEPT[key] = kept
    msg = object.__new__(type(kept))
    msg.__dict__.update(kept.__dict__)
    return msg


def _icmp6(icmp_type: int, **fields: Any) -> Fields:
    return dict(eth_type=ETH_TYPE_IPV6, ip_proto=IP_PROTO_ICMPV6, icmpv6_type=icmp_type, **fields)


def _claims(address: str, **where: Any) -> list[Fields]:
    """The matches of every claim of ``address`` (see the module docstring)."""
    return [
        _icmp6(ND_NA, ipv6_nd_target=address, **where),
        _icmp6(ND_NS, ipv6_src=address, **where),
    ]


def _own_sources(iface: Interface) -> list[Any]:
    """ipv6_src / nd_target values a host may use for itself: its address, any link-local."""
    own: list[Any] = [LINK_LOCAL]  # (value, mask)
    if iface.ip6 is not None:
        own.insert(0, str(iface.ip6.ip))
    return own


def _host_flows(port: int, iface: Interface) -> OFMsgs:
    own = _own_sources(iface)
    allowed = [_icmp6(ND_NS, in_port=port, ipv6_src=src) for src in [*own, UNSPECIFIED]]
    allowed += [_icmp6(ND_NA, in_port=port, ipv6_src=src, ipv6_nd_target=tgt) for src in own for tgt in own]
    ofmsgs = [_flow(PRIORITY_ND_HOST, m, forward=True) for m in allowed]
    ofmsgs += [_flow(PRIORITY_ND_HOST_DROP, _icmp6(t, in_port=port), forward=False) for t in (ND_NS, ND_NA)]
    return ofmsgs


def nd_guard_flows(topo: Topology, switch: str, dual_stack: bool) -> OFMsgs:
    """The RA guard and ND inspection flows of one campus switch (see the module docstring)."""
    routers = {p.port for p in router_ports(topo) if p.switch == switch}
    trunks = {p.port for p in trunk_ports(topo) if p.switch == switch}
    ofmsgs: OFMsgs = []
    for port in sorted(routers | trunks):
        types: Iterable[int] = ROUTER_ONLY + ((ND_NS, ND_NA) if port in trunks else ())
        ofmsgs += [_flow(PRIORITY_ND_TRUSTED, _icmp6(t, in_port=port), forward=True) for t in types]
    hosts = {p.port: iface for p, iface in host_ports(topo).items() if p.switch == switch}
    for claimed in protected(topo) if dual_stack else ():
        owner, address = claimed.owner, claimed.address
        if owner is not None and owner.switch == switch:
            ofmsgs += [_flow(PRIORITY_ND_TRUSTED, m, True) for m in _claims(address, in_port=owner.port)]
        if claimed.held:
            ofmsgs += [_flow(PRIORITY_ND_CLAIM, m, False) for m in _claims(address)]
        else:  # a gateway no device of the topology holds: its port is unknown
            ofmsgs += [_flow(PRIORITY_ND_CLAIM, m, False) for p in sorted(hosts) for m in _claims(address, in_port=p)]
    if dual_stack:
        for port in sorted(hosts):
            ofmsgs += _host_flows(port, hosts[port])
    ofmsgs += [_flow(PRIORITY_RA_DROP, _icmp6(t), forward=False) for t in ROUTER_ONLY]
    ofmsgs.append(_flow(PRIORITY_RA_DROP, dict(eth_type=ETH_TYPE_IPV6, ip_proto=IP_PROTO_UNWALKED), forward=False))
    return ofmsgs
