"""The campus model as typed, frozen facts. `loader.py` builds it from YAML and validates it.

Names are unique across switches, hosts, middleboxes and the edge router, so a link endpoint
``"s2:3"`` or a host name identifies exactly one thing.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from typing import Literal

from viplanes.topologies.profiles import Capabilities
from viplanes.topologies.zones import CT_ZONE_BASE_DEFAULT, ct_zone_problem

# Source addresses that only exist behind the campus NAT.
NAT_PREFIXES = tuple(
    ipaddress.IPv4Network(p) for p in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)

HostRole = Literal["desktop", "server", "dtn", "cloud"]
MiddleboxKind = Literal["firewall", "nat"]


@dataclass(frozen=True)
class SflowAgent:
    """A switch that samples for automatic lanes (docs/automatic-lanes.md): the agent address its
    sFlow datagrams carry, the addresses they are sent from (default: the agent), and optionally
    each port's sFlow ifIndex, so a sample can be traced to the port it was taken on."""

    agent: ipaddress.IPv4Address | ipaddress.IPv6Address
    sources: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]
    ifindex: tuple[tuple[int, int], ...] = ()  # (OpenFlow port, sFlow ifIndex) declared
    # where the controller learns the ifIndexes instead: "" (nowhere: only declared ones count),
    # "ovsdb" (this host's OVSDB) or an ovs-vsctl --db target ("tcp:HOST:6640", "ssl:..."). A
    # sample from a port whose ifIndex is neither declared nor learned is refused.
    ifindex_ovsdb: str = ""


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    role: str = "campus"  # free text for people: access, core, border, internet
    # SHA-256 (hex, of the DER certificate) of the TLS client certificates allowed to claim this
    # dpid; several during a rotation. Empty: a campus-CA certificate naming the dpid is enough.
    cert_sha256: tuple[str, ...] = ()
    # lanes ending here keep connection state (OVS ct); False: the stateless fallback
    # (see controller/compile/lane.py). Only the border switch's value matters today.
    conntrack: bool = True
    # Per lane at a conntrack border: new connections (``+new`` packets) per second its meter
    # lets through to the commit; the rest are dropped before they take a table entry.
    ct_new_per_s: int = 100
    # Per conntrack zone (one per lane address: dataplane.md) at a conntrack border: entries
    # allowed. Switch configuration, not OpenFlow: set by the runtime through ``ct_appctl``.
    ct_zone_limit: int = 10000
    # The ovs-appctl target (vswitchd control socket) through which the controller can set zone
    # limits, when it runs next to this switch's vswitchd; "" declares that it cannot (the limit
    # is then not set, and the log says so once per connection).
    ct_appctl: str = ""
    # True: the operator sets the zone limits on this switch's host (``viplanes topology
    # ct-limits`` prints the commands). A conntrack border with neither this nor ``ct_appctl``
    # has no ceiling on its connection table: ``conntrack_ceiling_problem`` says so.
    ct_limits_external: bool = False
    # profile, features and flow-table budget (topologies/profiles.py); ``conntrack`` above
    # always equals ``caps.features.conntrack``
    caps: Capabilities = Capabilities()
    # sFlow samples from this switch may start automatic lanes (None: its samples are refused)
    sflow: SflowAgent | None = None


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

    @property
    def name(self) -> str:
        """The link's identity, both ends as declared: ``s2:3-s3:3`` (parallel links differ)."""
        return f"{self.a}-{self.b}"


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
    # the lab only: the CPU (in cores) the host's processes may use, standing for a slower machine
    # (None: no limit; the controller never reads it)
    cpu_cores: float | None = None

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


# the cloud host's services the WAN model can place behind an endpoint (viplanes/lab/services.py)
WAN_SERVICES = ("iperf3", "s3", "ssh", "http")


@dataclass(frozen=True)
class WanEndpoint:
    """Some of the cloud host's services run on a server of their own (seed 003's cloud VM):
    their connections get this endpoint's per-connection caps instead of the provider's, and
    with ``total_mbps`` all of them together share one NIC, each way."""

    name: str
    services: tuple[str, ...]
    up_mbps: float | None = None  # per connection, client -> endpoint; None: the wan's
    down_mbps: float | None = None  # per connection, endpoint -> client; None: the wan's
    total_mbps: float | None = None  # every connection to the endpoint together, each way; None: no cap


@dataclass(frozen=True)
class Wan:
    """The internet path beyond the edge, as the lab models it (optional `wan:` section).

    ``per_connection_mbps`` caps every TCP connection to a cloud host's services in each
    direction: it stands in for TCP's window over a long round trip and for cloud endpoints that
    throttle each connection, the reasons parallel transfers pay on a real WAN.
    """

    per_connection_mbps: float
    burst_kb: float = 64.0  # token-bucket depth: how far a connection may run ahead of its rate
    # the round trip a connection sees beyond the edge: half of it is added in each direction
    rtt_ms: float = 0.0
    # asymmetric caps (a provider that takes uploads slower than it serves): None = per_connection_mbps
    up_mbps: float | None = None  # client -> cloud
    down_mbps: float | None = None  # cloud -> client
    # bytes a connection may have in flight per direction (TCP's window): throughput <= window / RTT
    window_kb: float = 4096.0
    # the cloud's storage: every S3 request waits for one of ``storage_workers`` and holds it
    # ``request_ms`` (0 = off) before the service sees it (seed 001's shared service queue)
    request_ms: float = 0.0
    storage_workers: int = 8
    # a read (GET, HEAD) is served from the provider's cache or first replica; a write is
    # acknowledged only once durable and replicated: None = request_ms (the same both ways)
    read_request_ms: float | None = None
    # the provider's per-account write quota: writes (PUT, POST, DELETE) admitted a second, all
    # connections together (0 = none); Google Drive, the paper's cloud, allows about 2 files a second
    write_rps: float = 0.0
    # servers of their own beyond the provider's (each service in one at most)
    endpoints: tuple[WanEndpoint, ...] = ()

    def endpoint(self, service: str) -> WanEndpoint | None:
        """The endpoint that runs ``service``; None: the provider's, under the wan's caps."""
        return next((e for e in self.endpoints if service in e.services), None)

    def down_for(self, service: str) -> float:
        """Mbit/s one connection to ``service`` may download (its endpoint's total bounds it too)."""
        e = self.endpoint(service)
        if e is None:
            return self.down
        per = self.down if e.down_mbps is None else e.down_mbps
        return min(per, e.total_mbps) if e.total_mbps is not None else per

    @property
    def up(self) -> float:
        """Mbit/s each connection may upload."""
        return self.per_connection_mbps if self.up_mbps is None else self.up_mbps

    @property
    def down(self) -> float:
        """Mbit/s each connection may download."""
        return self.per_connection_mbps if self.down_mbps is None else self.down_mbps

    @property
    def read_ms(self) -> float:
        """The storage's service time for a read (GET, HEAD); ``request_ms`` is a write's."""
        return self.request_ms if self.read_request_ms is None else self.read_request_ms


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
    # the router that translates NAT'd lanes when no switch on their path can ("": a switch does)
    nat_router: str = ""
    # the scitags experiment ids the campus marks in IPv6 flow labels (``ipv6_flow_label:``);
    # empty: the flow label means nothing here (the default)
    flow_label_experiments: tuple[int, ...] = ()
    # this deployment's first conntrack zone (``ct_zone_base:``, VIPLANES_CT_ZONE_BASE): deployments
    # on one vswitchd with disjoint zone ranges never touch each other's connections
    ct_zone_base: int = CT_ZONE_BASE_DEFAULT
    # links (``Link.name``) no lane may use now (down, damped, unverified): set by the controller
    # from live link state, never in a file; lane paths avoid them (``paths.switch_graph``)
    unusable_links: frozenset[str] = frozenset()
    source: str = field(default="<memory>", compare=False)  # file it came from, for messages

    def __hash__(self) -> int:
        """The fields' hash, computed once: a topology keys caches (``lru_cache`` in policy and
        lane budgets) on every request, and the generated hash walked every switch, link and
        host each time, so a request cost grew with the campus (issue 13)."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(
                (
                    self.name,
                    self.switches,
                    self.links,
                    self.hosts,
                    self.middleboxes,
                    self.edge,
                    self.lane_pool,
                    self.description,
                    self.wan,
                    self.nat_router,
                    self.flow_label_experiments,
                    self.ct_zone_base,
                    self.unusable_links,
                )
            )
            object.__setattr__(self, "_hash", cached)  # frozen dataclass: not a field
        return cached

    # Lookups by name, dpid and address: dictionaries built on first use and kept on the
    # (immutable) topology, so a request costs the same with 4 switches or 400 (issue 13).
    def _index(self) -> _Index:
        index = self.__dict__.get("_lookup_index")
        if index is None:
            index = _Index(self)
            object.__setattr__(self, "_lookup_index", index)  # frozen dataclass: not a field
        return index

    def switch(self, name: str) -> Switch:
        """The switch named ``name``; StopIteration when there is none."""
        found = self._index().switches.get(name)
        if found is None:
            raise StopIteration(name)
        return found

    def switch_by_dpid(self, dpid: int) -> Switch | None:
        return self._index().dpids.get(dpid)

    def host(self, name: str) -> Host:
        """The host named ``name``; StopIteration when there is none."""
        found = self._index().hosts.get(name)
        if found is None:
            raise StopIteration(name)
        return found

    def host_by_ip(self, ip: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> Host | None:
        """The host owning an IPv4 address or an IPv6 (``ip6``) address; ValueError for junk."""
        index = self._index()
        if isinstance(ip, str) and ip in index.by_text:  # the common case: a canonical string
            return index.by_text[ip]
        address = ipaddress.ip_address(ip)
        if getattr(address, "scope_id", None) is not None:
            raise ValueError(f"an IPv6 zone id is not a host's address: {ip}")
        return index.by_address.get(address)

    def campus_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """The lane pool, then the subnets of the edge's inside leg, the middlebox legs and the
        campus hosts (v4 and v6), each once: a lane's destination must be outside all of them."""
        return self._index().campus_networks

    def lane_addresses(self) -> tuple[ipaddress.IPv4Address, ...]:
        """Lane-pool addresses usable as NAT addresses (not the edge subnet's network/broadcast)."""
        subnet = self.edge.inside.ip.network
        reserved = {subnet.network_address, subnet.broadcast_address}
        return tuple(a for a in self.lane_pool.prefix if a not in reserved)


def with_ct_zone_base(topo: Topology, base: int) -> Topology:
    """The topology with another first conntrack zone (the deployment's setting); ValueError
    naming the range when the deployment's zones would not fit."""
    problem = ct_zone_problem(base, topo.lane_pool.prefix, len(topo.hosts))
    if problem is not None:
        raise ValueError(f"ct_zone_base {base}: {problem}")
    return replace(topo, ct_zone_base=base)


class _Index:
    """A topology's lookup tables (first of each name or address, as the linear scans were)."""

    def __init__(self, topo: Topology) -> None:
        self.switches: dict[str, Switch] = {}
        self.dpids: dict[int, Switch] = {}
        for sw in topo.switches:
            self.switches.setdefault(sw.name, sw)
            self.dpids.setdefault(sw.dpid, sw)
        self.hosts: dict[str, Host] = {}
        self.by_address: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, Host] = {}
        for host in topo.hosts:
            self.hosts.setdefault(host.name, host)
            self.by_address.setdefault(host.iface.ip.ip, host)
        for host in topo.hosts:  # v4 first, as before: v4 and v6 never collide anyway
            if host.ip6 is not None:
                self.by_address.setdefault(host.ip6, host)
        self.by_text: dict[str, Host] = {str(a): h for a, h in self.by_address.items()}
        ifaces = [topo.edge.inside] + [leg for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]
        ifaces += [h.iface for h in topo.hosts if h.role != "cloud"]
        nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = [topo.lane_pool.prefix]
        for iface in ifaces:
            nets.append(iface.ip.network)
            if iface.ip6 is not None:
                nets.append(iface.ip6.network)
        self.campus_networks = tuple(dict.fromkeys(nets))
