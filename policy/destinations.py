"""Destinations no lane may name, whatever a grant says — pure, from the topology.

A lane is a hole in the campus firewall towards the outside world. Naming a broadcast or multicast
address would fan the flow out; a loopback, link-local, unspecified or reserved address is no real
peer; a campus address (a host, a middlebox leg, the edge router, or anything in their subnets)
would use the lane to reach *into* the campus past the firewall; a lane-pool address is another
lane's identity. Each refusal has a short code for the API and metrics:

    dst_broadcast   255.255.255.255, or the network/broadcast address of any subnet in the topology
    dst_multicast   224.0.0.0/4
    dst_reserved    0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 240.0.0.0/4
    dst_shared      100.64.0.0/10 (RFC 6598 shared space: a carrier's NAT inside, not a peer)
    dst_lane_pool   inside the topology's lane pool
    dst_campus      an address of a campus host, middlebox leg or router, or inside their subnets

IPv6 gets the same treatment (``ip6`` addresses of the topology are campus space too):

    dst_multicast   ff00::/8
    dst_reserved    ::/128, ::1/128, fe80::/10 (link-local), ::ffff:0:0/96 (v4-mapped), fec0::/10
    dst_embeds_ipv4 64:ff9b::/96 and 64:ff9b:1::/48 (NAT64), 2002::/16 (6to4), 2001::/32 (Teredo),
                    ::/96 (IPv4-compatible), ::ffff:0:0:0/96 (SIIT translated)
    dst_campus      fc00::/7 (unique-local: campus-internal by definition) and the campus's v6 subnets

An IPv6 destination that embeds an IPv4 address is refused whole: a translator or relay on the way
turns it back into IPv4, so ``64:ff9b::a01:a`` is 10.1.0.10 (a campus host) reached past every
IPv4 check above, and which IPv4 address a relay picks is not ours to vet.

A lane *prefix* (``dst_prefix``) is refused when it overlaps any of this space at all: unlike a
grant's prefix, every address of a lane prefix is carried.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from viplanes.topologies.model import Interface, Topology

IPv4Address = ipaddress.IPv4Address
IPv4Network = ipaddress.IPv4Network

LIMITED_BROADCAST = IPv4Address("255.255.255.255")
MULTICAST = IPv4Network("224.0.0.0/4")
RESERVED = (
    IPv4Network("0.0.0.0/8"),
    IPv4Network("127.0.0.0/8"),
    IPv4Network("169.254.0.0/16"),
    IPv4Network("240.0.0.0/4"),
)
IPv6Address = ipaddress.IPv6Address
IPv6Network = ipaddress.IPv6Network
IPAddr = IPv4Address | IPv6Address
IPNet = IPv4Network | IPv6Network
MULTICAST6 = IPv6Network("ff00::/8")
RESERVED6 = (
    IPv6Network("::/128"),
    IPv6Network("::1/128"),
    IPv6Network("fe80::/10"),
    IPv6Network("::ffff:0:0/96"),
    IPv6Network("fec0::/10"),
)
UNIQUE_LOCAL6 = IPv6Network("fc00::/7")
SHARED = IPv4Network("100.64.0.0/10")
# IPv6 space whose addresses carry an IPv4 address a translator or relay on the path acts on
EMBEDS_IPV4 = (
    IPv6Network("64:ff9b::/96"),  # NAT64 well-known prefix (RFC 6052)
    IPv6Network("64:ff9b:1::/48"),  # NAT64 local-use (RFC 8215)
    IPv6Network("2002::/16"),  # 6to4 (RFC 3056)
    IPv6Network("2001::/32"),  # Teredo (RFC 4380)
    IPv6Network("::/96"),  # IPv4-compatible (RFC 4291, deprecated); ::/128 and ::1 are reserved first
    IPv6Network("::ffff:0:0:0/96"),  # SIIT IPv4-translated (RFC 2765)
)


def within(net: IPNet, other: IPNet) -> bool:
    """``net`` lies inside ``other``; False across IP versions (where ``subnet_of`` raises)."""
    if isinstance(net, IPv4Network) and isinstance(other, IPv4Network):
        return net.subnet_of(other)
    if isinstance(net, IPv6Network) and isinstance(other, IPv6Network):
        return net.subnet_of(other)
    return False


@dataclass(frozen=True)
class ForbiddenSpace:
    pool: IPv4Network
    campus_nets: tuple[IPv4Network, ...]
    campus_addrs: frozenset[IPv4Address]
    edge_addrs: frozenset[IPv4Address]  # network/broadcast of every known subnet, inside or out
    campus_nets6: tuple[IPv6Network, ...] = ()
    campus_addrs6: frozenset[IPv6Address] = frozenset()


def _interfaces(topo: Topology) -> tuple[list[Interface], list[Interface]]:
    """(campus interfaces, outside interfaces): the cloud hosts and the edge's outside leg are outside."""
    campus = [h.iface for h in topo.hosts if h.role != "cloud"]
    campus += [leg for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]
    campus.append(topo.edge.inside)
    outside = [h.iface for h in topo.hosts if h.role == "cloud"] + [topo.edge.outside]
    return campus, outside


@lru_cache(maxsize=16)
def forbidden_space(topo: Topology) -> ForbiddenSpace:
    campus, outside = _interfaces(topo)
    edges: set[IPv4Address] = set()
    for iface in campus + outside:
        net = iface.ip.network
        if net.prefixlen <= 30:  # /31 and /32 have no network or broadcast address
            edges |= {net.network_address, net.broadcast_address}
    v6_campus = [i.ip6 for i in campus if i.ip6 is not None]
    v6_edge_out = topo.edge.outside.ip6
    return ForbiddenSpace(
        pool=topo.lane_pool.prefix,
        campus_nets=tuple(sorted({i.ip.network for i in campus})),
        campus_addrs=frozenset({i.ip.ip for i in campus} | {topo.edge.outside.ip.ip}),
        edge_addrs=frozenset(edges),
        campus_nets6=tuple(sorted({i.network for i in v6_campus})),
        campus_addrs6=frozenset({i.ip for i in v6_campus} | ({v6_edge_out.ip} if v6_edge_out else set())),
    )


def _refusal6(dst: IPv6Address, space: ForbiddenSpace) -> tuple[str, str] | None:
    if dst in MULTICAST6:
        return "dst_multicast", f"destination {dst} is a multicast address"
    if any(dst in net for net in RESERVED6):
        return "dst_reserved", f"destination {dst} is unspecified, loopback, link-local, mapped or reserved"
    if any(dst in net for net in EMBEDS_IPV4):
        return "dst_embeds_ipv4", f"destination {dst} embeds an IPv4 address (NAT64, 6to4, Teredo or compatible)"
    if dst in UNIQUE_LOCAL6:
        return "dst_campus", f"destination {dst} is a unique-local address; lanes lead out of the campus"
    if dst in space.campus_addrs6 or any(dst in net for net in space.campus_nets6):
        return "dst_campus", f"destination {dst} is inside the campus; lanes lead out of it"
    return None


def destination_refusal(dst: IPAddr, topo: Topology) -> tuple[str, str] | None:
    """(code, reason) when no lane may go to ``dst``; None when it may."""
    space = forbidden_space(topo)
    if isinstance(dst, IPv6Address):
        return _refusal6(dst, space)
    if dst == LIMITED_BROADCAST or dst in space.edge_addrs:
        return "dst_broadcast", f"destination {dst} is a broadcast or subnet address"
    if dst in MULTICAST:
        return "dst_multicast", f"destination {dst} is a multicast address"
    if any(dst in net for net in RESERVED):
        return "dst_reserved", f"destination {dst} is unspecified, loopback, link-local or reserved"
    if dst in SHARED:
        return "dst_shared", f"destination {dst} is in the shared address space 100.64.0.0/10 (carrier NAT)"
    if dst in space.pool:
        return "dst_lane_pool", f"destination {dst} is a lane-pool address"
    if dst in space.campus_addrs or any(dst in net for net in space.campus_nets):
        return "dst_campus", f"destination {dst} is inside the campus; lanes lead out of it"
    return None


def _forbidden_nets(net: IPNet, space: ForbiddenSpace) -> list[tuple[IPNet, str]]:
    if isinstance(net, IPv6Network):
        return [
            (MULTICAST6, "multicast"),
            *((r, "reserved") for r in RESERVED6),
            *((e, "IPv4-embedding space") for e in EMBEDS_IPV4),
            (UNIQUE_LOCAL6, "unique-local space"),
            *((c, "a campus subnet") for c in space.campus_nets6),
        ]
    return [
        (MULTICAST, "multicast"),
        *((r, "reserved") for r in RESERVED),
        (SHARED, "the shared address space"),
        (space.pool, "the lane pool"),
        *((c, "a campus subnet") for c in space.campus_nets),
    ]


_CODES = {
    "multicast": "dst_multicast",
    "the lane pool": "dst_lane_pool",
    "reserved": "dst_reserved",
    "IPv4-embedding space": "dst_embeds_ipv4",
    "the shared address space": "dst_shared",
}


def lane_net_refusal(net: IPNet, topo: Topology) -> tuple[str, str] | None:
    """(code, reason) when a lane may not carry ``net`` (one address, or every address of a prefix)."""
    if net.num_addresses == 1:
        return destination_refusal(net.network_address, topo)
    space = forbidden_space(topo)
    for bad, what in _forbidden_nets(net, space):
        if net.overlaps(bad):
            code = _CODES.get(what, "dst_campus")
            return code, f"destination prefix {net} overlaps {what} ({bad})"
    singles = space.campus_addrs6 if net.version == 6 else space.campus_addrs | space.edge_addrs
    if net.version == 4 and LIMITED_BROADCAST in net:
        return "dst_broadcast", f"destination prefix {net} holds the broadcast address"
    inside = sorted(str(a) for a in singles if a in net)
    if inside:
        return "dst_campus", f"destination prefix {net} holds campus or subnet addresses ({', '.join(inside[:4])})"
    return None


def grant_prefix_refusal(net: IPNet, topo: Topology) -> tuple[str, str] | None:
    """(code, reason) when a grant may not name ``net`` as a destination: it lies wholly in
    forbidden space.

    A wider prefix that merely *contains* forbidden space (0.0.0.0/0, 10.0.0.0/8) stays allowed:
    the lane-time check above refuses the forbidden addresses inside it one by one.
    """
    space = forbidden_space(topo)
    if net.num_addresses == 1:
        return destination_refusal(net.network_address, topo)
    for bad, what in _forbidden_nets(net, space):
        if within(net, bad):
            return _CODES.get(what, "dst_campus"), f"destination prefix {net} lies inside {what} ({bad})"
    return None
