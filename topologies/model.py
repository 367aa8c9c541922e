"""The campus model as typed, frozen facts. `loader.py` builds it from YAML and validates it.

Names are unique across switches, hosts, middleboxes and the edge router, so a link endpoint
``"s2:3"`` or a host name identifies exactly one thing.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

# Source addresses that only exist behind the campus NAT.
NAT_PREFIXES = tuple(ipaddress.IPv4Network(p) for p in
                     ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"))

HostRole = Literal["desktop", "server", "dtn", "cloud"]
MiddleboxKind = Literal["firewall", "nat"]


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    role: str = "campus"  # free text for people: access, core, border, internet
    # SHA-256 (hex, of the DER certificate) of the TLS client certificates allowed to claim this
    # dpid; several during a rotation. Empty: a campus-CA certificate naming the dpid is enough.
    cert_sha256: tuple[str, ...] = ()
    # lanes ending here keep connection state (OVS ct); False: the stateless fallback
    # (see controller/compiler.py). Only the border switch's value matters today.
    conntrack: bool = True


@dataclass(frozen=True)
class PortRef:
    """One switch port: where a host, a middlebox leg or a link end plugs in."""

    switch: str
    port: int

    def __str__(self) -> str:
        return f"{self.switch}:{self.port}"


@dataclass(frozen=True)
class Link:
    """A switch-to-switch cable. ``bypass`` links exist only for lanes: no default traffic."""

    a: PortRef
    b: PortRef
    mbps: float
    bypass: bool = False


@dataclass(frozen=True)
class Interface:
    """An L3 interface of a host, middlebox leg or router leg."""

    mac: str
    ip: ipaddress.IPv4Interface  # address with its prefix, e.g. 10.1.0.10/24
    attach: PortRef | None  # None for a leg cabled straight to another node (fw <-> nat)
    ip6: ipaddress.IPv6Interface | None = None  # global IPv6 address with prefix (dual stack)


@dataclass(frozen=True)
class Host:
    name: str
    role: HostRole
    iface: Interface
    gateway: ipaddress.IPv4Address
    nic_mbps: float
    gateway6: ipaddress.IPv6Address | None = None  # set exactly when iface.ip6 is

    @property
    def ip6(self) -> ipaddress.IPv6Address | None:
        return self.iface.ip6.ip if self.iface.ip6 is not None else None

    def address_for(self, version: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The host's own address of one IP family (a lane to a v6 destination leaves from it)."""
        return self.iface.ip.ip if version == 4 else self.ip6

    @property
    def needs_nat(self) -> bool:
        """A private source must be translated to a lane-pool address on the lane.

        "Private" means RFC 1918 or shared (RFC 6598) space, the addresses a campus NAT hides.
        Python's ``is_private`` also counts the documentation ranges (198.51.100.0/24, ...) that
        the lab uses as public addresses, so it is not used here. IPv6 is never translated: a v6
        host holds a global address.
        """
        return any(self.iface.ip.ip in net for net in NAT_PREFIXES)


@dataclass(frozen=True)
class Middlebox:
    """A firewall or NAT on the default path. ``mbps`` caps its throughput (models DPI)."""

    name: str
    kind: MiddleboxKind
    inside: Interface
    outside: Interface
    mbps: float | None = None
    # destination prefix -> next hop, for the middlebox's own routing table
    routes: tuple[tuple[ipaddress.IPv4Network, ipaddress.IPv4Address], ...] = ()


@dataclass(frozen=True)
class EdgeRouter:
    """The campus edge: lanes end at its inside port."""

    name: str
    inside: Interface
    outside: Interface
    routes: tuple[tuple[ipaddress.IPv4Network, ipaddress.IPv4Address], ...] = ()


@dataclass(frozen=True)
class LanePool:
    """Public addresses handed to NAT'd hosts on a lane, and the MAC the controller answers with."""

    prefix: ipaddress.IPv4Network
    mac: str


@dataclass(frozen=True)
class Wan:
    """The internet path beyond the edge, as the lab models it (optional `wan:` section).

    ``per_connection_mbps`` caps every TCP connection to a cloud host's services in each
    direction: it stands in for TCP's window over a long round trip and for cloud endpoints that
    throttle each connection, the reasons parallel transfers pay on a real WAN.
    """

    per_connection_mbps: float
    burst_kb: float = 64.0  # token-bucket depth: how far a connection may run ahead of its rate


@dataclass(frozen=True)
class Topology:
    name: str
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    hosts: tuple[Host, ...]
    middleboxes: tuple[Middlebox, ...]
    edge: EdgeRouter
    lane_pool: LanePool
    description: str = ""
    wan: Wan | None = None  # None: no per-connection limit (the lab's links only)
    source: str = field(default="<memory>", compare=False)  # file it came from, for messages

    def switch(self, name: str) -> Switch:
        return next(s for s in self.switches if s.name == name)

    def switch_by_dpid(self, dpid: int) -> Switch | None:
        return next((s for s in self.switches if s.dpid == dpid), None)

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def host_by_ip(self, ip: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> Host | None:
        """The host owning an IPv4 address or an IPv6 (``ip6``) address; ValueError for junk."""
        addr = ipaddress.ip_address(ip)
        if addr.version == 6:
            return next((h for h in self.hosts if h.ip6 == addr), None)
        return next((h for h in self.hosts if h.iface.ip.ip == addr), None)

    def lane_addresses(self) -> tuple[ipaddress.IPv4Address, ...]:
        """Lane-pool addresses usable as NAT addresses (not the edge subnet's network/broadcast)."""
        subnet = self.edge.inside.ip.network
        reserved = {subnet.network_address, subnet.broadcast_address}
        return tuple(a for a in self.lane_pool.prefix if a not in reserved)
