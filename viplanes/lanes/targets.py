"""What a lane request points at: its destination set and port ranges, resolved and counted.

A request names its destination in exactly one way: ``dst_ip`` (one address), ``dst_prefix`` (a
network, every address of which the lane carries) or ``dst_host`` (a DNS name: all its A/AAAA
addresses, re-resolved while the lane lives). Ports are ``dst_port`` (one) or ``dst_ports`` (a
range "50000-51000" or a list ``[5201, "9000-9100"]``). Addresses of a family the source host
lacks are left out of a name's set (a v4-only desktop cannot use the name's AAAA records); the
answer to the request says so in its reason. The policy decides afterwards; this module only reads.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from viplanes.domain.portmasks import PortRangeError, entry_count, mask_count, parse_port_ranges
from viplanes.domain.values import host_net
from viplanes.errors import Invalid, VipError
from viplanes.lanes.resolver import ResolveError, Resolver, is_host_name
from viplanes.topologies.model import Host, Topology
from viplanes.topologies.paths import lane_path

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network
PortRanges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LaneInput:
    """A request as the API read it: exactly one of dst_ip/dst_prefix/dst_host and one of
    dst_port/dst_ports (see ``viplanes.lanes.targets``)."""

    src_ip: str
    dst_ip: str | None
    protocol: str
    dst_port: int | None
    duration_s: int
    purpose: str
    src_port: int | None = None
    start_at: float | None = None
    rate_mbps: float | None = None
    dst_prefix: str | None = None
    dst_host: str | None = None
    dst_ports: Any = None  # "50000-51000" or [5201, "9000-9100"]


@dataclass(frozen=True)
class LaneLimits:
    """Operator knobs (``AppConfig``): the match budget of one lane and the DNS re-resolve window."""

    max_matches: int = 64
    ttl_floor_s: float = 30.0
    ttl_cap_s: float = 3600.0


class NameUnresolvable(VipError):
    status, code = 422, "dst_host_unresolvable"


@dataclass(frozen=True)
class LaneTarget:
    nets: tuple[IPNet, ...]
    ports: PortRanges
    host: str | None = None  # the DNS name the nets came from
    ttl_s: float | None = None  # how long the name's answer may be trusted
    dropped: tuple[str, ...] = ()  # a name's addresses of a family the source cannot use

    @property
    def match_count(self) -> int:
        """Distinct (destination, masked port) matches per direction."""
        return len(self.nets) * mask_count(self.ports)

    def net_strings(self) -> list[str]:
        return [str(n) for n in self.nets]

    def single_address(self) -> str | None:
        if len(self.nets) == 1 and self.nets[0].num_addresses == 1:
            return str(self.nets[0].network_address)
        return None

    def single_port(self) -> int | None:
        return self.ports[0][0] if len(self.ports) == 1 and self.ports[0][0] == self.ports[0][1] else None


def sort_nets(nets: set[IPNet] | list[IPNet]) -> tuple[IPNet, ...]:
    return tuple(sorted(set(nets), key=lambda n: (n.version, n)))


def parse_ports(dst_port: int | None, dst_ports: Any) -> PortRanges:
    if (dst_port is None) == (dst_ports is None):
        raise Invalid("give exactly one of dst_port and dst_ports", code="invalid_ports")
    try:
        return parse_port_ranges(dst_port if dst_port is not None else dst_ports)
    except PortRangeError as exc:
        raise Invalid(str(exc), {"dst_ports": [str(exc)]}, code="invalid_ports") from None


def resolve_target(
    dst_ip: str | None,
    dst_prefix: str | None,
    dst_host: str | None,
    dst_port: int | None,
    dst_ports: Any,
    source: Host | None,
    resolver: Resolver,
) -> LaneTarget:
    """Read the request's destination fields; resolve a name. Invalid when they do not add up."""
    given = [k for k, v in (("dst_ip", dst_ip), ("dst_prefix", dst_prefix), ("dst_host", dst_host)) if v is not None]
    if len(given) != 1:
        raise Invalid(
            "give exactly one of dst_ip, dst_prefix and dst_host" + (f" (got {', '.join(given)})" if given else ""),
            code="invalid_destination",
        )
    ports = parse_ports(dst_port, dst_ports)
    for text in (dst_ip, dst_prefix):
        if text is not None and "%" in text:  # a zone id survives str() and breaks lookups by text
            raise Invalid(f"an IPv6 zone id is not a lane address: {text!r}", code="invalid_address")
    if dst_ip is not None:
        try:
            addr = ipaddress.ip_address(dst_ip)
        except ValueError:
            raise Invalid(f"not an IPv4 or IPv6 address: {dst_ip!r}", code="invalid_address") from None
        return LaneTarget((ipaddress.ip_network(host_net(str(addr))),), ports)
    if dst_prefix is not None:
        try:
            net = ipaddress.ip_network(dst_prefix, strict=True)
        except ValueError as exc:
            raise Invalid(f"not a prefix: {dst_prefix!r} ({exc})", code="invalid_address") from None
        return LaneTarget((net,), ports)
    assert dst_host is not None
    name = dst_host.strip().rstrip(".").lower()
    if not is_host_name(name):
        raise Invalid(f"not a host name: {dst_host!r}", code="invalid_host_name")
    try:
        found = resolver.resolve(name)
    except ResolveError as exc:
        raise NameUnresolvable(f"cannot resolve {name}: {exc}", {"dst_host": name}) from None
    nets, dropped = usable_nets(found.addresses, source)
    if not nets:
        raise NameUnresolvable(
            f"{name} resolves to {', '.join(found.addresses)}, none of a family the source has an address of",
            {"dst_host": name, "addresses": list(found.addresses)},
        )
    return LaneTarget(nets, ports, name, found.ttl_s, dropped)


def usable_nets(
    addresses: tuple[str, ...] | list[str], source: Host | None
) -> tuple[tuple[IPNet, ...], tuple[str, ...]]:
    """(one-address networks the source can reach, addresses of a family it lacks)."""
    keep: list[IPNet] = []
    dropped: list[str] = []
    for text in addresses:
        addr = ipaddress.ip_address(text)
        if source is not None and source.address_for(addr.version) is None:
            dropped.append(str(addr))
        else:
            keep.append(ipaddress.ip_network(host_net(str(addr))))
    return sort_nets(keep), tuple(dropped)


def clamp_ttl(ttl_s: float | None, floor_s: float, cap_s: float) -> float:
    return min(cap_s, max(floor_s, ttl_s if ttl_s is not None else floor_s))


def target_for_request(body: Any, topology: Topology, resolver: Resolver, max_matches: int) -> LaneTarget:
    """The target of a ``LaneInput``; refused when it needs more matches than the operator allows
    (VIPLANES_MAX_LANE_MATCHES)."""
    try:
        source = topology.host_by_ip(body.src_ip)
    except ValueError:
        raise Invalid(f"not an IPv4 or IPv6 address: {body.src_ip!r}", code="invalid_address") from None
    target = resolve_target(
        body.dst_ip, body.dst_prefix, body.dst_host, body.dst_port, body.dst_ports, source, resolver
    )
    if target.match_count > max_matches:
        raise Invalid(
            f"this lane needs {target.match_count} matches per direction ({len(target.nets)} "
            f"destination(s) x {mask_count(target.ports)} masked port entries); the limit is "
            f"{max_matches}",
            {"match_count": target.match_count, "limit": max_matches},
            code="too_many_matches",
        )
    return target


PER_HOP_FACTOR = 2  # a forward and a reverse rule per hop and (destination, masked port) match
# at a conntrack border, per address family: the table-1 reply rules (established, related) and
# the table-3 commit rules (new through the new-connection meter, the rest: compile/ctlane.py)
CT_REPLY_FLOWS_PER_FAMILY = 4


@lru_cache(maxsize=1024)
def _hops(topology: Topology, src_ip: str) -> list[bool] | None:
    """Per switch of the lane's path: whether it matches masked ports (else a range is exact)."""
    try:
        host = topology.host_by_ip(src_ip)
        if host is None:
            return None
        return [topology.switch(h.switch).caps.features.masked_ports for h in lane_path(topology, host.name)]
    except ValueError:
        return None


def _stateful(topology: Topology) -> bool:
    """The edge router's switch keeps connection state (the compiler's ``lanepath.stateful``)."""
    at = topology.edge.inside.attach
    return bool(at and topology.switch(at.switch).conntrack)


def _families(dst_ip: str | None, dst_nets: list[str] | None) -> int:
    texts = list(dst_nets) if dst_nets else ([dst_ip] if dst_ip else [])
    return max(1, len({":" in t for t in texts}))


def lane_budget(
    src_ip: str,
    dst_ip: str | None,
    dst_port: int | None,
    dst_nets: list[str] | None,
    dst_ports: list[Any] | None,
    topology: Topology | None,
) -> tuple[int, int | None]:
    """(match_count, flow_count) of a lane row: matches = destinations x masked port entries;
    flows = matches x PER_HOP_FACTOR per hop of its path (destinations x exact ports on a switch
    without masked ports), + CT_REPLY_FLOWS_PER_FAMILY per address
    family at a conntrack border (None when the path is unknown): exactly what
    ``controller.compiler.compile_lane`` emits (meters and per-address shared flows not counted)."""
    n_nets = len(dst_nets) if dst_nets else 1
    ranges = [(int(lo), int(hi)) for lo, hi in dst_ports] if dst_ports else [(dst_port or 1, dst_port or 1)]
    matches = n_nets * mask_count(ranges)
    hops = _hops(topology, src_ip) if topology is not None else None
    if not hops or topology is None:
        return matches, None
    ct = CT_REPLY_FLOWS_PER_FAMILY * _families(dst_ip, dst_nets) if _stateful(topology) else 0
    per_hop = sum(n_nets * entry_count(ranges, masked) for masked in hops)
    return matches, per_hop * PER_HOP_FACTOR + ct
