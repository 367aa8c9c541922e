"""Load a campus YAML file into a :class:`Topology`, or say exactly what is wrong with it.

Every problem is collected (not just the first) and reported as ``FILE: FIELD: what is wrong``,
e.g. ``campus.yaml: hosts[1].attach: unknown switch 's9'``, so an operator fixes a file in one pass.
The YAML layout is the one in ``campus.yaml``.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml

from viplanes.topologies.capfields import read_nat_router
from viplanes.topologies.fields import FieldReader, kind_of
from viplanes.topologies.hostfields import read_cpu_cores
from viplanes.topologies.model import (
    CT_ZONE_BASE_DEFAULT,
    EdgeRouter,
    Host,
    HostRole,
    Interface,
    LanePool,
    Link,
    Middlebox,
    MiddleboxKind,
    Switch,
    Topology,
    ct_zone_problem,
)
from viplanes.topologies.sflowfields import read_flow_label
from viplanes.topologies.switchfields import read_switch
from viplanes.topologies.wanfields import read_wan

HOST_ROLES: tuple[HostRole, ...] = ("desktop", "server", "dtn", "cloud")
MIDDLEBOX_KINDS: tuple[MiddleboxKind, ...] = ("firewall", "nat")

Route = tuple[ipaddress.IPv4Network, ipaddress.IPv4Address]


class TopologyError(ValueError):
    """The topology file is unusable; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: list[str] | str) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("\n".join(self.problems))


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (plain PyYAML silently keeps the last one)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, (str, int, float, bool)):
            continue  # unhashable keys are reported by the validator as unknown keys
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)
MAX_FILE_BYTES = 1 << 20  # a campus file is a few KB; refuse to parse anything absurd


def load_topology(path: str | Path) -> Topology:
    """Read and validate one topology YAML file."""
    source = str(path)
    try:
        if Path(path).stat().st_size > MAX_FILE_BYTES:
            raise TopologyError(f"{source}: file is larger than {MAX_FILE_BYTES} bytes")
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{source}: cannot read file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TopologyError(f"{source}: not a UTF-8 text file") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TopologyError(f"{source}: invalid YAML{where}: {problem}") from None
    return parse_topology(data, source)


def parse_topology(data: Any, source: str = "<memory>") -> Topology:
    """Validate already-parsed YAML data (a dict) and build the frozen model."""
    return _Parser(source).topology(data)


class _Parser:
    """Walks the data once, noting problems with their field path; builds the model if none."""

    def __init__(self, source: str) -> None:
        self.fields = FieldReader(source)  # the file's field readers and the problems they noted
        self._switches: list[Switch] = []
        self.host_where: dict[str, str] = {}
        self.mb_where: dict[str, str] = {}

    # ---- the model --------------------------------------------------------------------------
    def topology(self, data: Any) -> Topology:
        top = self.fields.mapping(
            data,
            "",
            ("name", "lane_pool", "switches", "hosts", "edge"),
            ("description", "links", "middleboxes", "wan", "nat_router", "ipv6_flow_label", "ct_zone_base"),
        )
        if top is None:
            raise TopologyError(self.fields.problems)
        name = self.fields.text(top.get("name"), "name") if "name" in top else None
        description = top.get("description", "")
        if not isinstance(description, str):
            self.fields.bad("description", f"expected a string, got {kind_of(description)}")
        switches = self.fields.items(top, "switches", self.switch)
        if top.get("switches") in ([], None) and "switches" in top:
            self.fields.bad("switches", "at least one switch is needed")
        edge = self.edge(top["edge"]) if "edge" in top else None
        middleboxes = self.fields.items(top, "middleboxes", self.middlebox)
        hosts = self.fields.items(top, "hosts", self.host)
        links = self.fields.items(top, "links", self.link)
        pool = self.lane_pool(top["lane_pool"], edge) if "lane_pool" in top else None
        wan = read_wan(self.fields, top["wan"]) if top.get("wan") is not None else None
        if edge is not None:
            self.check_gateways(hosts, middleboxes, edge)
            self.check_direct_cables(middleboxes, edge)
        translators = ([edge.name] if edge is not None else []) + [mb.name for mb in middleboxes if mb.kind == "nat"]
        nat_router = read_nat_router(self.fields, top["nat_router"], translators) if "nat_router" in top else ""
        flow_label = read_flow_label(self.fields, top.get("ipv6_flow_label"))
        zone_base = top.get("ct_zone_base", CT_ZONE_BASE_DEFAULT)
        if pool is not None and (why := ct_zone_problem(zone_base, pool.prefix, len(hosts))) is not None:
            self.fields.bad("ct_zone_base", why)
        if self.fields.problems or name is None or edge is None or pool is None:
            # every None above comes with a problem; the fallback keeps the error readable
            raise TopologyError(self.fields.problems or [f"{self.fields.source}: incomplete topology"])
        return Topology(
            name=name,
            switches=tuple(switches),
            links=tuple(links),
            hosts=tuple(hosts),
            middleboxes=tuple(middleboxes),
            edge=edge,
            lane_pool=pool,
            description=description.strip() if isinstance(description, str) else "",
            wan=wan,
            nat_router=nat_router,
            flow_label_experiments=flow_label,
            ct_zone_base=zone_base,
            source=self.fields.source,
        )

    def switch(self, item: Any, where: str) -> Switch | None:
        sw = read_switch(self.fields, item, where, self._switches)
        if sw is not None:
            self._switches.append(sw)
        return sw

    def interface(self, value: Any, where: str, attach_required: bool) -> Interface | None:
        required = ("mac", "ip", "attach") if attach_required else ("mac", "ip")
        m = self.fields.mapping(value, where, required, ("ip6",) if attach_required else ("attach", "ip6"))
        if m is None:
            return None
        mac = self.fields.mac(m.get("mac"), f"{where}.mac") if "mac" in m else None
        ip = self.fields.iface_ip(m.get("ip"), f"{where}.ip") if "ip" in m else None
        ip6 = self.fields.iface_ip6(m["ip6"], f"{where}.ip6") if m.get("ip6") is not None else None
        if m.get("ip6") is not None and ip6 is None:
            return None
        attach = None
        if m.get("attach") is not None:
            attach = self.fields.portref(m["attach"], f"{where}.attach")
            if attach is None:
                return None
        elif attach_required:
            if "attach" in m:  # present but empty; a missing key was reported by mapping()
                self.fields.bad(f"{where}.attach", "expected \"SWITCH:PORT\" like \"s1:3\", got nothing")
            return None
        if mac is None or ip is None:
            return None
        return Interface(mac=mac, ip=ip, attach=attach, ip6=ip6)

    def leg(self, m: dict[str, Any], where: str, key: str, attach_required: bool) -> Interface | None:
        if key not in m:
            return None
        return self.interface(m[key], f"{where}.{key}", attach_required)

    def routes(self, value: Any, where: str, legs: list[Interface]) -> tuple[Route, ...]:
        out: list[Route] = []
        for i, item in enumerate(self.fields.listing(value, where)):
            here = f"{where}[{i}]"
            m = self.fields.mapping(item, here, ("dst", "via"))
            if m is None or "dst" not in m or "via" not in m:
                continue
            dst = self.fields.network(m["dst"], f"{here}.dst")
            via = self.fields.address(m["via"], f"{here}.via")
            if via is not None and legs and not any(via in leg.ip.network for leg in legs):
                nets = ", ".join(str(leg.ip.network) for leg in legs)
                self.fields.bad(f"{here}.via", f"next hop {via} is in none of this node's subnets ({nets})")
                continue
            if dst is not None and via is not None:
                out.append((dst, via))
        return tuple(out)

    def middlebox(self, item: Any, where: str) -> Middlebox | None:
        m = self.fields.mapping(item, where, ("name", "kind", "inside", "outside"), ("mbps", "routes"))
        if m is None:
            return None
        name = self.fields.name(m.get("name"), f"{where}.name") if "name" in m else None
        kind = self.fields.choice(m.get("kind"), f"{where}.kind", MIDDLEBOX_KINDS) if "kind" in m else None
        mbps = self.fields.number(m.get("mbps"), f"{where}.mbps", optional=True)
        inside = self.leg(m, where, "inside", attach_required=False)
        outside = self.leg(m, where, "outside", attach_required=False)
        legs = [leg for leg in (inside, outside) if leg is not None]
        routes = self.routes(m.get("routes"), f"{where}.routes", legs)
        if inside is not None and outside is not None and not (inside.attach or outside.attach):
            self.fields.bad(where, "neither leg is attached to a switch")
            return None
        if name is None or kind is None or inside is None or outside is None:
            return None
        if m.get("mbps") is not None and mbps is None:
            return None
        self.mb_where[name] = where
        return Middlebox(name=name, kind=kind, inside=inside, outside=outside, mbps=mbps, routes=routes)

    def edge(self, item: Any) -> EdgeRouter | None:
        m = self.fields.mapping(item, "edge", ("name", "inside", "outside"), ("routes",))
        if m is None:
            return None
        name = self.fields.name(m.get("name"), "edge.name") if "name" in m else None
        inside = self.leg(m, "edge", "inside", attach_required=True)
        outside = self.leg(m, "edge", "outside", attach_required=False)
        legs = [leg for leg in (inside, outside) if leg is not None]
        routes = self.routes(m.get("routes"), "edge.routes", legs)
        if name is None or inside is None or outside is None:
            return None
        return EdgeRouter(name=name, inside=inside, outside=outside, routes=routes)

    def host(self, item: Any, where: str) -> Host | None:
        m = self.fields.mapping(
            item,
            where,
            ("name", "role", "mac", "ip", "gateway", "attach", "nic_mbps"),
            ("ip6", "gateway6", "cpu_cores"),
        )
        if m is None:
            return None
        name = self.fields.name(m.get("name"), f"{where}.name") if "name" in m else None
        role = self.fields.choice(m.get("role"), f"{where}.role", HOST_ROLES) if "role" in m else None
        iface = self.interface({k: m[k] for k in ("mac", "ip", "attach", "ip6") if k in m}, where, True)
        gateway6 = self.gateway6(m, where, iface)
        gateway = self.fields.address(m.get("gateway"), f"{where}.gateway") if "gateway" in m else None
        nic = self.fields.number(m.get("nic_mbps"), f"{where}.nic_mbps") if "nic_mbps" in m else None
        cpu_cores = read_cpu_cores(self.fields, m, where)
        if "cpu_cores" in m and cpu_cores is None:
            return None  # reported with its key
        if iface is not None and gateway is not None:
            if gateway not in iface.ip.network:
                self.fields.bad(f"{where}.gateway", f"{gateway} is not in the host's subnet {iface.ip.network}")
                gateway = None
            elif gateway == iface.ip.ip:
                self.fields.bad(f"{where}.gateway", "the gateway is the host's own address")
                gateway = None
        if name is None or role is None or iface is None or gateway is None or nic is None:
            return None
        self.host_where[name] = where
        if (iface.ip6 is None) != (gateway6 is None):
            return None  # reported by gateway6()
        return Host(
            name=name, role=role, iface=iface, gateway=gateway, nic_mbps=nic, gateway6=gateway6, cpu_cores=cpu_cores
        )

    def gateway6(self, m: dict[str, Any], where: str, iface: Interface | None) -> ipaddress.IPv6Address | None:
        """``gateway6`` comes with ``ip6`` (and only with it), inside its subnet, not the host itself."""
        has_ip6, has_gw6 = m.get("ip6") is not None, m.get("gateway6") is not None
        if has_ip6 != has_gw6:
            self.fields.bad(f"{where}.{'gateway6' if has_ip6 else 'ip6'}", "ip6 and gateway6 go together")
            return None
        if not has_gw6 or iface is None or iface.ip6 is None:
            return None
        gw = self.fields.address6(m["gateway6"], f"{where}.gateway6")
        if gw is not None and gw not in iface.ip6.network:
            self.fields.bad(f"{where}.gateway6", f"{gw} is not in the host's subnet {iface.ip6.network}")
            return None
        if gw is not None and gw == iface.ip6.ip:
            self.fields.bad(f"{where}.gateway6", "the gateway is the host's own address")
            return None
        return gw

    def link(self, item: Any, where: str) -> Link | None:
        m = self.fields.mapping(item, where, ("a", "b", "mbps"), ("bypass",))
        if m is None:
            return None
        a = self.fields.portref(m.get("a"), f"{where}.a") if "a" in m else None
        b = self.fields.portref(m.get("b"), f"{where}.b") if "b" in m else None
        mbps = self.fields.number(m.get("mbps"), f"{where}.mbps") if "mbps" in m else None
        bypass = m.get("bypass", False)
        if not isinstance(bypass, bool):
            self.fields.bad(f"{where}.bypass", f"expected true or false, got {bypass!r}")
            return None
        if a is not None and b is not None and a.switch == b.switch:
            self.fields.bad(where, f"link connects switch {a.switch} to itself")
            return None
        if a is None or b is None or mbps is None:
            return None
        return Link(a=a, b=b, mbps=mbps, bypass=bypass)

    def lane_pool(self, item: Any, edge: EdgeRouter | None) -> LanePool | None:
        m = self.fields.mapping(item, "lane_pool", ("prefix", "mac"))
        if m is None:
            return None
        prefix = self.fields.network(m.get("prefix"), "lane_pool.prefix") if "prefix" in m else None
        mac = self.fields.mac(m.get("mac"), "lane_pool.mac") if "mac" in m else None
        if prefix is not None and edge is not None:
            inside = edge.inside.ip.network
            if not prefix.subnet_of(inside):
                self.fields.bad("lane_pool.prefix", f"{prefix} is not inside the edge router's inside subnet {inside}")
            for ip, owner in sorted(self.fields.ips.items()):
                if ip in prefix:
                    self.fields.bad("lane_pool.prefix", f"{prefix} contains {ip}, already used by {owner}")
        if prefix is None or mac is None:
            return None
        return LanePool(prefix=prefix, mac=mac)

    def check_direct_cables(self, middleboxes: list[Middlebox], edge: EdgeRouter) -> None:
        """A leg without a switch port is cabled straight to another such leg (fw <-> nat), so
        one must share its subnet; otherwise the lab cannot build that cable."""
        loose = [
            (f"{self.mb_where[mb.name]}.{name}", leg)
            for mb in middleboxes
            for name, leg in (("inside", mb.inside), ("outside", mb.outside))
            if leg.attach is None
        ]
        edge_loose = [leg for leg in (edge.inside, edge.outside) if leg.attach is None]
        for where, leg in loose:
            peers = [other for w, other in loose if w != where] + edge_loose
            if not any(leg.ip.network == other.ip.network for other in peers):
                self.fields.bad(
                    where,
                    f"not attached to a switch, and no other unattached leg is in {leg.ip.network} to cable it to",
                )

    def check_gateways(self, hosts: list[Host], middleboxes: list[Middlebox], edge: EdgeRouter | None) -> None:
        """A gateway must be a modeled router leg: the lab builds it and lanes need its MAC."""
        legs = {leg.ip.ip for mb in middleboxes for leg in (mb.inside, mb.outside)}
        if edge is not None:
            legs |= {edge.inside.ip.ip, edge.outside.ip.ip}
        legs6 = {leg.ip6.ip for mb in middleboxes for leg in (mb.inside, mb.outside) if leg.ip6}
        if edge is not None:
            legs6 |= {leg.ip6.ip for leg in (edge.inside, edge.outside) if leg.ip6}
        for host in hosts:
            if host.gateway not in legs:
                self.fields.bad(
                    f"{self.host_where[host.name]}.gateway",
                    f"{host.gateway} is not an address of a middlebox or the edge router",
                )
            if host.gateway6 is not None and host.gateway6 not in legs6:
                self.fields.bad(
                    f"{self.host_where[host.name]}.gateway6",
                    f"{host.gateway6} is not an ip6 address of a middlebox or the edge router",
                )
