"""Host source guards: on every host-facing port, drop a campus host's address as a source (and
ARP or a neighbour advertisement claiming it) unless the port is the host's own.

Split from ``base.py``: one kind of base flow with its own cache (a campus of many access
switches repeats the same guards on the same port numbers). ``base.base_flows`` adds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.bands import (
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    IP_PROTO_ICMPV6,
    PRIORITY_GUARD,
    OFMsgs,
    flow,
)
from viplanes.controller.compile.cookies import BASE_COOKIE
from viplanes.controller.compile.fastmatch import exact_match
from viplanes.controller.compile.flowkey import cached_key
from viplanes.topologies.model import Topology

# One host guard per (port number, address, kind) is built once per process and copied per switch:
# every access switch drops the same campus addresses on the same port numbers, so a campus of
# 128 access switches compiled 133,833 flow-mods for ~2,000 distinct ones (2.4 s at a restart).
_KEPT_GUARDS: dict[tuple[int, str, str], Any] = {}
_KEPT_GUARDS_MAX = 200_000


def _guard(port: int, address: str, kind: str, build: Callable[[], Any]) -> Any:
    """A fresh FlowMod equal to ``build()``: a shallow copy of the kept one, its flow key
    included. Copies share the match (never changed once built) and own their xid and buffer."""
    kept = _KEPT_GUARDS.get((port, address, kind))
    if kept is None:
        if len(_KEPT_GUARDS) >= _KEPT_GUARDS_MAX:
            _KEPT_GUARDS.clear()
        kept = build()
        cached_key(kept)
        _KEPT_GUARDS[(port, address, kind)] = kept
    msg = object.__new__(type(kept))
    msg.__dict__.update(kept.__dict__)
    return msg


ND_NEIGHBOR_ADVERT = 136


def host_source_guards(topo: Topology, switch: str) -> OFMsgs:
    """Drop a campus host's address as IPv4 source or ARP sender address on the switch's
    host-facing ports that are not the host's own; for a dual-stack host also its IPv6 address
    as source and as the target of a neighbour advertisement (IPv6's ARP reply: a spoofed one
    would steal the host's v6 traffic on the campus path), on the other hosts' ports."""
    facing = {h.iface.attach for h in topo.hosts if h.iface.attach}
    facing |= {leg.attach for mb in topo.middleboxes for leg in (mb.inside, mb.outside) if leg.attach}
    if topo.edge.inside.attach:
        facing.add(topo.edge.inside.attach)
    campus_hosts = [h for h in topo.hosts if h.role != "cloud" and h.iface.attach]
    # IPv6 is routed, never translated: a router's leg (a middlebox, the edge) legitimately
    # forwards a host's own v6 source, so the v6 guards sit on other hosts' ports only
    host_ports = {h.iface.attach for h in topo.hosts}
    out: OFMsgs = []
    for port in sorted((p for p in facing if p.switch == switch), key=lambda p: p.port):
        for host in campus_hosts:
            if host.iface.attach != port:
                out += _v4_source_guards(port.port, str(host.iface.ip.ip))
                if host.ip6 is not None and port in host_ports:
                    out += _v6_source_guards(port.port, str(host.ip6))
    return out


def _v4_source_guards(port: int, address: str) -> OFMsgs:
    """The address as IPv4 source, and ARP claiming it (a poisoned ARP cache would steal the
    host's replies)."""
    return [
        _guard(
            port,
            address,
            "ipv4",
            lambda: flow(
                PRIORITY_GUARD,
                BASE_COOKIE,
                exact_match(dict(in_port=port, eth_type=ETH_TYPE_IPV4, ipv4_src=address)),
                [],
            ),
        ),
        _guard(
            port,
            address,
            "arp",
            lambda: flow(
                PRIORITY_GUARD, BASE_COOKIE, exact_match(dict(in_port=port, eth_type=ETH_TYPE_ARP, arp_spa=address)), []
            ),
        ),
    ]


def _v6_source_guards(port: int, address: str) -> OFMsgs:
    """The IPv6 half of a host source guard (os-ken's OFPMatch: dual-stack campuses only)."""
    return [
        _guard(
            port,
            address,
            "ipv6",
            lambda: flow(
                PRIORITY_GUARD, BASE_COOKIE, parser.OFPMatch(in_port=port, eth_type=ETH_TYPE_IPV6, ipv6_src=address), []
            ),
        ),
        _guard(
            port,
            address,
            "nd",
            lambda: flow(
                PRIORITY_GUARD,
                BASE_COOKIE,
                parser.OFPMatch(
                    in_port=port,
                    eth_type=ETH_TYPE_IPV6,
                    ip_proto=IP_PROTO_ICMPV6,
                    icmpv6_type=ND_NEIGHBOR_ADVERT,
                    ipv6_nd_target=address,
                ),
                [],
            ),
        ),
    ]
