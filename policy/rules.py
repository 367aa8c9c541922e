"""The decision "is this lane request inside one of its principal's grants?" — pure, deny by default.

No I/O here: the store reads the grants and the live-lane counts inside its transaction and hands
them in; the answer carries a reason a person can read and a short machine code for metrics.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from viplanes.topologies.model import Host, Topology

from .destinations import lane_net_refusal, within

IPv4Net = ipaddress.IPv4Network
IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddr = ipaddress.IPv4Address | ipaddress.IPv6Address
PortRange = tuple[int, int]

# Upper bounds that keep every number inside a 32-bit database column and a sane calendar.
MAX_DURATION_S = 366 * 24 * 3600
MAX_RATE_MBPS = 1_000_000.0
MAX_AHEAD_S = 366 * 24 * 3600  # how far in the future a lane may be booked
START_SLACK_S = 5.0  # a start_at this far in the past still counts as "now" (clock skew)


class PolicyInputError(ValueError):
    """A grant or request field that cannot be understood (bad prefix, bad port range)."""


def parse_prefix(text: str) -> IPNet:
    """ "10.1.0.10", "10.1.0.0/24" or "2001:db8::/48" -> network; host bits set are an error, not
    silently masked."""
    try:
        return ipaddress.ip_network(str(text).strip(), strict=True)
    except ValueError as exc:
        raise PolicyInputError(f"not an IPv4/IPv6 address or prefix: {text!r} ({exc})") from None


def parse_ports(items: Iterable[int | str]) -> tuple[PortRange, ...]:
    """Numbers and "lo-hi" ranges -> sorted inclusive ranges; 1..65535 only."""
    out: list[PortRange] = []
    for item in items:
        if isinstance(item, bool):
            raise PolicyInputError(f"not a port: {item!r}")
        if isinstance(item, int):
            lo = hi = item
        else:
            text = str(item).strip()
            lo_s, sep, hi_s = text.partition("-")
            try:
                lo = int(lo_s)
                hi = int(hi_s) if sep else lo
            except ValueError:
                raise PolicyInputError(f"not a port or range: {item!r}") from None
        if not (1 <= lo <= hi <= 65535):
            raise PolicyInputError(f"port range out of 1..65535 or reversed: {item!r}")
        out.append((lo, hi))
    return tuple(sorted(out))


def format_ports(ranges: Sequence[PortRange]) -> list[str]:
    return [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges]


@dataclass(frozen=True)
class GrantRule:
    """What one grant allows. Times are unix seconds; ``None`` means unbounded."""

    grant_id: int
    src_prefixes: tuple[IPNet, ...]
    dst_prefixes: tuple[IPNet, ...]
    protocols: frozenset[str]
    ports: tuple[PortRange, ...]
    max_duration_s: int
    max_rate_mbps: float | None
    max_lanes: int
    valid_from: float | None = None
    valid_until: float | None = None
    revoked: bool = False


@dataclass(frozen=True)
class LaneRequest:
    """One lane asked for. ``dst_nets``/``dst_ports`` are the destination sets (see
    ``viplanes.domain.values``); the old ``dst_ip``/``dst_port`` fill them when they are left empty."""

    src_ip: IPAddr
    dst_ip: IPAddr | None
    protocol: str
    dst_port: int | None
    src_port: int | None
    duration_s: int
    starts_at: float  # resolved start (now for an immediate lane)
    rate_mbps: float | None
    dst_nets: tuple[IPNet, ...] = ()
    dst_ports: tuple[PortRange, ...] = ()
    # the addresses the lane's packets leave from, one per destination family (``lane_sources``);
    # empty: ``src_ip`` alone. ``src_ip`` only names the host: a v4 destination leaves from the
    # host's v4 address whichever of its addresses the request gave.
    src_addrs: tuple[IPAddr, ...] = ()

    def __post_init__(self) -> None:
        if not self.dst_nets and self.dst_ip is not None:
            object.__setattr__(self, "dst_nets", (ipaddress.ip_network(self.dst_ip),))
        if not self.dst_ports and self.dst_port is not None:
            object.__setattr__(self, "dst_ports", ((self.dst_port, self.dst_port),))

    @property
    def expires_at(self) -> float:
        return self.starts_at + self.duration_s

    def describe_dst(self) -> str:
        return ", ".join(str(n.network_address) if n.num_addresses == 1 else str(n) for n in self.dst_nets)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    code: str  # short, stable: "allowed", "no_grant", "quota", ... (metrics label)
    reason: str  # for people
    grant_id: int | None = None


def lane_sources(host: Host, nets: Iterable[IPNet]) -> tuple[IPAddr, ...]:
    """The host's own address of each family among ``nets``: what a grant's sources must cover."""
    found = {a for a in (host.address_for(v) for v in sorted({n.version for n in nets})) if a is not None}
    return tuple(sorted(found, key=lambda a: (a.version, a)))


def _in_any(addr: IPAddr, nets: Sequence[IPNet]) -> bool:
    return any(addr in net for net in nets)


def _net_in_any(net: IPNet, nets: Sequence[IPNet]) -> bool:
    return any(within(net, g) for g in nets)


def _ranges_inside(wanted: Sequence[PortRange], granted: Sequence[PortRange]) -> list[PortRange]:
    """The requested ranges not wholly inside the granted ports (adjacent grant ranges join)."""
    joined: list[PortRange] = []
    for lo, hi in sorted(granted):
        if joined and lo <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(joined[-1][1], hi))
        else:
            joined.append((lo, hi))
    return [(lo, hi) for lo, hi in wanted if not any(g_lo <= lo and hi <= g_hi for g_lo, g_hi in joined)]


def _fmt_net(net: IPNet) -> str:
    return str(net.network_address) if net.num_addresses == 1 else str(net)


def check_grant(req: LaneRequest, rule: GrantRule, now: float, live_lanes: int) -> Decision:
    """One grant against one request: the first unmet condition is the reason."""
    gid = rule.grant_id
    if rule.revoked:
        return Decision(False, "grant_revoked", f"grant {gid} was revoked", gid)
    if rule.valid_from is not None and req.starts_at < rule.valid_from:
        return Decision(False, "grant_not_yet_valid", f"grant {gid} is not valid before the lane starts", gid)
    if rule.valid_until is not None and now >= rule.valid_until:
        return Decision(False, "grant_expired", f"grant {gid} has ended", gid)
    for src in req.src_addrs or (req.src_ip,):
        if not _in_any(src, rule.src_prefixes):
            return Decision(False, "src_not_granted", f"source {src} is outside grant {gid}", gid)
    outside = [n for n in req.dst_nets if not _net_in_any(n, rule.dst_prefixes)]
    if outside or not req.dst_nets:
        what = ", ".join(_fmt_net(n) for n in outside) or "(none)"
        return Decision(False, "dst_not_granted", f"destination {what} is outside grant {gid}", gid)
    if req.protocol not in rule.protocols:
        return Decision(False, "protocol_not_granted", f"protocol {req.protocol} is not in grant {gid}", gid)
    missing = _ranges_inside(req.dst_ports, rule.ports)
    if missing or not req.dst_ports:
        what = ", ".join(format_ports(missing)) or "(none)"
        return Decision(False, "port_not_granted", f"port {what} is not in grant {gid}", gid)
    if req.duration_s > rule.max_duration_s:
        return Decision(
            False,
            "duration_too_long",
            f"duration {req.duration_s}s exceeds grant {gid} maximum {rule.max_duration_s}s",
            gid,
        )
    if rule.valid_until is not None and req.expires_at > rule.valid_until:
        return Decision(False, "past_grant_end", f"lane would outlive grant {gid}", gid)
    if rule.max_rate_mbps is not None:
        if req.rate_mbps is None:
            return Decision(False, "rate_required", f"grant {gid} requires rate_mbps <= {rule.max_rate_mbps}", gid)
        if req.rate_mbps > rule.max_rate_mbps:
            return Decision(
                False,
                "rate_too_high",
                f"rate {req.rate_mbps} Mbit/s exceeds grant {gid} maximum {rule.max_rate_mbps}",
                gid,
            )
    if live_lanes >= rule.max_lanes:
        return Decision(
            False, "quota", f"grant {gid} already has {live_lanes} of {rule.max_lanes} concurrent lanes", gid
        )
    return Decision(True, "allowed", f"inside grant {gid}", gid)


# Failing late in the checklist means the request came closer; report the closest miss.
_ORDER = [
    "grant_revoked",
    "grant_not_yet_valid",
    "grant_expired",
    "src_not_granted",
    "dst_not_granted",
    "protocol_not_granted",
    "port_not_granted",
    "duration_too_long",
    "past_grant_end",
    "rate_required",
    "rate_too_high",
    "quota",
]


def decide(
    req: LaneRequest, rules: Sequence[GrantRule], topology: Topology, now: float, live_lanes: dict[int, int]
) -> Decision:
    """Allow only when some grant allows; otherwise deny with the most telling reason."""
    host = topology.host_by_ip(req.src_ip)
    if host is None:
        return Decision(False, "unknown_source", f"source {req.src_ip} is not a host of topology {topology.name}")
    if host.role == "cloud":
        return Decision(False, "source_not_campus", f"source {host.name} is outside the campus")
    for net in req.dst_nets:
        if host.address_for(net.version) is None:
            return Decision(
                False,
                "dst_family_unreachable",
                f"destination {_fmt_net(net)} is IPv{net.version} but source {host.name} "
                f"has no IPv{net.version} address",
            )
        refusal = lane_net_refusal(net, topology)
        if refusal is not None:
            return Decision(False, *refusal)
    if req.starts_at < now - START_SLACK_S:
        return Decision(False, "start_in_past", "start_at is in the past")
    if req.starts_at > now + MAX_AHEAD_S:
        return Decision(False, "start_too_far", "start_at is more than a year ahead")
    if not rules:
        return Decision(False, "no_grant", "no grant for this principal")
    if not req.src_addrs:
        req = replace(req, src_addrs=lane_sources(host, req.dst_nets))
    best: Decision | None = None
    for rule in rules:
        d = check_grant(req, rule, now, live_lanes.get(rule.grant_id, 0))
        if d.allowed:
            return d
        if best is None or _ORDER.index(d.code) > _ORDER.index(best.code):
            best = d
    assert best is not None
    return best


def allocate_nat(pool: IPv4Net, in_use: Iterable[str]) -> str | None:
    """Lowest free usable address of the lane pool, or None when every one is taken."""
    used = {ipaddress.IPv4Address(a) for a in in_use}
    for addr in pool.hosts():
        if addr not in used:
            return str(addr)
    return None


def destination_refusals(
    nets: Sequence[IPNet], rule: GrantRule, topology: Topology, src_ip: IPAddr
) -> dict[IPNet, str]:
    """Each destination a lane of this grant may not carry, with why (a re-resolved name's new
    addresses are checked one by one: the allowed ones are added, the rest named and left out)."""
    host = topology.host_by_ip(src_ip)
    out: dict[IPNet, str] = {}
    for net in nets:
        source = host.address_for(net.version) if host is not None else None
        if host is not None and source is None:
            out[net] = f"source {host.name} has no IPv{net.version} address"
        elif (refusal := lane_net_refusal(net, topology)) is not None:
            out[net] = refusal[1]
        elif not _net_in_any(net, rule.dst_prefixes):
            out[net] = f"outside grant {rule.grant_id}"
        elif source is not None and not _in_any(source, rule.src_prefixes):
            out[net] = f"its source {source} is outside grant {rule.grant_id}"
    return out
