"""Destinations no lane may name, whatever a grant says — pure, from the topology.

A lane is a hole in the campus firewall towards the outside world. Naming a broadcast or multicast
address would fan the flow out; a loopback, link-local, unspecified or reserved address is no real
peer; a campus address (a host, a middlebox leg, the edge router, or anything in their subnets)
would use the lane to reach *into* the campus past the firewall; a lane-pool address is another
lane's identity. Each refusal has a short code for the API and metrics:

    dst_broadcast   255.255.255.255, or the network/broadcast address of any subnet in the topology
    dst_multicast   224.0.0.0/4
    dst_reserved    0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 240.0.0.0/4
    dst_lane_pool   inside the topology's lane pool
    dst_campus      an address of a campus host, middlebox leg or router, or inside their subnets
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
RESERVED = (IPv4Network("0.0.0.0/8"), IPv4Network("127.0.0.0/8"), IPv4Network("169.254.0.0/16"),
            IPv4Network("240.0.0.0/4"))


@dataclass(frozen=True)
class ForbiddenSpace:
    pool: IPv4Network
    campus_nets: tuple[IPv4Network, ...]
    campus_addrs: frozenset[IPv4Address]
    edge_addrs: frozenset[IPv4Address]  # network/broadcast of every known subnet, inside or out


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
    return ForbiddenSpace(
        pool=topo.lane_pool.prefix,
        campus_nets=tuple(sorted({i.ip.network for i in campus})),
        campus_addrs=frozenset({i.ip.ip for i in campus} | {topo.edge.outside.ip.ip}),
        edge_addrs=frozenset(edges),
    )


def destination_refusal(dst: IPv4Address, topo: Topology) -> tuple[str, str] | None:
    """(code, reason) when no lane may go to ``dst``; None when it may."""
    space = forbidden_space(topo)
    if dst == LIMITED_BROADCAST or dst in space.edge_addrs:
        return "dst_broadcast", f"destination {dst} is a broadcast or subnet address"
    if dst in MULTICAST:
        return "dst_multicast", f"destination {dst} is a multicast address"
    if any(dst in net for net in RESERVED):
        return "dst_reserved", f"destination {dst} is unspecified, loopback, link-local or reserved"
    if dst in space.pool:
        return "dst_lane_pool", f"destination {dst} is a lane-pool address"
    if dst in space.campus_addrs or any(dst in net for net in space.campus_nets):
        return "dst_campus", f"destination {dst} is inside the campus; lanes lead out of it"
    return None


def prefix_refusal(net: IPv4Network, topo: Topology) -> str | None:
    """Why a grant may not name ``net`` as a destination: it lies wholly in forbidden space.

    A wider prefix that merely *contains* forbidden space (0.0.0.0/0, 10.0.0.0/8) stays allowed:
    the lane-time check above refuses the forbidden addresses inside it one by one.
    """
    space = forbidden_space(topo)
    if net.num_addresses == 1:
        refusal = destination_refusal(net.network_address, topo)
        return refusal[1] if refusal else None
    for bad, what in ((MULTICAST, "multicast"), *((r, "reserved") for r in RESERVED),
                      (space.pool, "the lane pool"), *((c, "a campus subnet") for c in space.campus_nets)):
        if net.subnet_of(bad):
            return f"destination prefix {net} lies inside {what} ({bad})"
    return None
