"""Load a campus YAML file into a :class:`Topology`, or say exactly what is wrong with it.

Every problem is collected (not just the first) and reported as ``FILE: FIELD: what is wrong``,
e.g. ``campus.yaml: hosts[1].attach: unknown switch 's9'``, so an operator fixes a file in one pass.
The YAML layout is the one in ``campus.yaml``.
"""
from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Any, Callable

import yaml

from viplanes.topologies.model import (
    EdgeRouter, Host, Interface, LanePool, Link, Middlebox, PortRef, Switch, Topology,
)

HOST_ROLES = ("desktop", "server", "dtn", "cloud")
MIDDLEBOX_KINDS = ("firewall", "nat")
OFPP_MAX = 0xFFFFFF00  # highest physical OpenFlow 1.3 port number
DPID_MAX = 2**64 - 1
# Mininet names interfaces NAME-ethN and Linux allows 15 characters.
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,8}$")
MAC_RE = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")
PORTREF_RE = re.compile(r"^([^:\s]+):(\d+)$")

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
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _mapping_without_duplicates)
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
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
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
        self.source = source
        self.problems: list[str] = []
        self.switch_names: set[str] = set()
        self.node_names: dict[str, str] = {}  # name -> field path that defined it
        self.ports: dict[PortRef, str] = {}
        self.macs: dict[str, str] = {}
        self.ips: dict[ipaddress.IPv4Address, str] = {}
        self._switches: list[Switch] = []
        self.host_where: dict[str, str] = {}

    def bad(self, where: str, what: str) -> None:
        self.problems.append(f"{self.source}: {where}: {what}")

    # ---- generic shapes -------------------------------------------------------------------
    def mapping(self, value: Any, where: str, required: tuple[str, ...],
                optional: tuple[str, ...] = ()) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.bad(where or "top level", f"expected a mapping, got {_kind(value)}")
            return None
        for key in value:
            if key not in required and key not in optional:
                allowed = ", ".join(required + optional)
                self.bad(f"{where}.{key}" if where else str(key),
                         f"unknown key (allowed: {allowed})")
        for key in required:
            if key not in value:
                self.bad(where or "top level", f"missing required key '{key}'")
        return value

    def listing(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(where, f"expected a list, got {_kind(value)}")
            return []
        return value

    def text(self, value: Any, where: str) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.bad(where, f"expected a non-empty string, got {_kind(value)}")
            return None
        return value

    def number(self, value: Any, where: str, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value <= 0):
            self.bad(where, f"expected a positive number, got {value!r}")
            return None
        return float(value)

    def choice(self, value: Any, where: str, options: tuple[str, ...]) -> str | None:
        if value not in options:
            self.bad(where, f"{value!r} is not one of {', '.join(options)}")
            return None
        return value

    def name(self, value: Any, where: str) -> str | None:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.bad(where, f"bad name {value!r}: use a letter then up to 8 letters, digits or _ "
                            "(Mininet interface names NAME-ethN must fit 15 characters)")
            return None
        if value in self.node_names:
            self.bad(where, f"duplicate name {value!r} (already used by {self.node_names[value]})")
            return None
        self.node_names[value] = where
        return value

    def mac(self, value: Any, where: str) -> str | None:
        if not isinstance(value, str) or not MAC_RE.match(value):
            hint = ""
            if isinstance(value, int):
                hint = " (quote it: YAML reads some unquoted MACs as numbers)"
            self.bad(where, f"bad MAC address {value!r}, expected like \"02:00:00:00:00:01\"{hint}")
            return None
        mac = value.lower()
        if int(mac[:2], 16) & 1 or mac == "00:00:00:00:00:00":
            self.bad(where, f"MAC {value} is not a unicast address")
            return None
        if mac in self.macs:
            self.bad(where, f"duplicate MAC {value} (already used by {self.macs[mac]})")
            return None
        self.macs[mac] = where
        return mac

    def address(self, value: Any, where: str) -> ipaddress.IPv4Address | None:
        try:
            return ipaddress.IPv4Address(value)
        except (ValueError, TypeError):
            self.bad(where, f"bad IPv4 address {value!r}")
            return None

    def network(self, value: Any, where: str) -> ipaddress.IPv4Network | None:
        if not isinstance(value, str) or "/" not in value:
            self.bad(where, f"bad prefix {value!r}, expected like 10.1.0.0/24")
            return None
        try:
            return ipaddress.IPv4Network(value)
        except ValueError as exc:
            self.bad(where, f"bad prefix {value!r}: {exc}")
            return None

    def iface_ip(self, value: Any, where: str) -> ipaddress.IPv4Interface | None:
        if not isinstance(value, str) or "/" not in value:
            self.bad(where, f"bad address {value!r}, expected address/prefix like 10.1.0.10/24")
            return None
        try:
            ip = ipaddress.IPv4Interface(value)
        except ValueError as exc:
            self.bad(where, f"bad address {value!r}: {exc}")
            return None
        net = ip.network
        if net.prefixlen <= 30 and ip.ip in (net.network_address, net.broadcast_address):
            self.bad(where, f"{ip.ip} is the network or broadcast address of {net}")
            return None
        if ip.ip in self.ips:
            self.bad(where, f"duplicate address {ip.ip} (already used by {self.ips[ip.ip]})")
            return None
        self.ips[ip.ip] = where
        return ip

    def portref(self, value: Any, where: str) -> PortRef | None:
        match = PORTREF_RE.match(value) if isinstance(value, str) else None
        if match is None:
            self.bad(where, f"bad attachment {value!r}, expected \"SWITCH:PORT\" like \"s1:3\"")
            return None
        switch, port = match.group(1), int(match.group(2))
        if switch not in self.switch_names:
            known = ", ".join(sorted(self.switch_names)) or "none"
            self.bad(where, f"unknown switch {switch!r} (known: {known})")
            return None
        if not 1 <= port <= OFPP_MAX:
            self.bad(where, f"port {port} is out of range 1..{OFPP_MAX}")
            return None
        ref = PortRef(switch, port)
        if ref in self.ports:
            self.bad(where, f"port {ref} is already used by {self.ports[ref]}")
            return None
        self.ports[ref] = where
        return ref

    def items(self, data: dict[str, Any], key: str,
              build: Callable[[Any, str], Any]) -> list[Any]:
        items = self.listing(data.get(key), key)
        built = [build(item, f"{key}[{i}]") for i, item in enumerate(items)]
        return [b for b in built if b is not None]

    # ---- the model --------------------------------------------------------------------------
    def topology(self, data: Any) -> Topology:
        top = self.mapping(data, "", ("name", "lane_pool", "switches", "hosts", "edge"),
                           ("description", "links", "middleboxes"))
        if top is None:
            raise TopologyError(self.problems)
        name = self.text(top.get("name"), "name") if "name" in top else None
        description = top.get("description", "")
        if not isinstance(description, str):
            self.bad("description", f"expected a string, got {_kind(description)}")
        switches = self.items(top, "switches", self.switch)
        if top.get("switches") in ([], None) and "switches" in top:
            self.bad("switches", "at least one switch is needed")
        edge = self.edge(top["edge"]) if "edge" in top else None
        middleboxes = self.items(top, "middleboxes", self.middlebox)
        hosts = self.items(top, "hosts", self.host)
        links = self.items(top, "links", self.link)
        pool = self.lane_pool(top["lane_pool"], edge) if "lane_pool" in top else None
        if edge is not None:
            self.check_gateways(hosts, middleboxes, edge)
        if self.problems or name is None or edge is None or pool is None:
            raise TopologyError(self.problems)
        return Topology(name=name, switches=tuple(switches), links=tuple(links), hosts=tuple(hosts),
                        middleboxes=tuple(middleboxes), edge=edge, lane_pool=pool,
                        description=description.strip() if isinstance(description, str) else "",
                        source=self.source)

    def switch(self, item: Any, where: str) -> Switch | None:
        m = self.mapping(item, where, ("name", "dpid"), ("role",))
        if m is None:
            return None
        name = self.name(m.get("name"), f"{where}.name") if "name" in m else None
        if name is not None:
            self.switch_names.add(name)  # even if its dpid is bad: avoid follow-on "unknown switch"
        dpid = m.get("dpid")
        if "dpid" in m and (isinstance(dpid, bool) or not isinstance(dpid, int)
                            or not 1 <= dpid <= DPID_MAX):
            self.bad(f"{where}.dpid", f"expected an integer 1..2**64-1, got {dpid!r}")
            dpid = None
        elif dpid is not None and any(getattr(s, "dpid", None) == dpid for s in self._switches):
            self.bad(f"{where}.dpid", f"duplicate dpid {dpid}")
            dpid = None
        role = m.get("role", "campus")
        if not isinstance(role, str):
            self.bad(f"{where}.role", f"expected a string, got {_kind(role)}")
        if name is None or dpid is None or not isinstance(role, str):
            return None
        sw = Switch(name=name, dpid=dpid, role=role)
        self._switches.append(sw)
        return sw

    def interface(self, value: Any, where: str, attach_required: bool) -> Interface | None:
        required = ("mac", "ip", "attach") if attach_required else ("mac", "ip")
        m = self.mapping(value, where, required, () if attach_required else ("attach",))
        if m is None:
            return None
        mac = self.mac(m.get("mac"), f"{where}.mac") if "mac" in m else None
        ip = self.iface_ip(m.get("ip"), f"{where}.ip") if "ip" in m else None
        attach = None
        if m.get("attach") is not None:
            attach = self.portref(m["attach"], f"{where}.attach")
            if attach is None:
                return None
        elif attach_required:
            return None
        if mac is None or ip is None:
            return None
        return Interface(mac=mac, ip=ip, attach=attach)

    def leg(self, m: dict[str, Any], where: str, key: str,
            attach_required: bool) -> Interface | None:
        if key not in m:
            return None
        return self.interface(m[key], f"{where}.{key}", attach_required)

    def routes(self, value: Any, where: str, legs: list[Interface]) -> tuple[Route, ...]:
        out: list[Route] = []
        for i, item in enumerate(self.listing(value, where)):
            here = f"{where}[{i}]"
            m = self.mapping(item, here, ("dst", "via"))
            if m is None or "dst" not in m or "via" not in m:
                continue
            dst = self.network(m["dst"], f"{here}.dst")
            via = self.address(m["via"], f"{here}.via")
            if via is not None and legs and not any(via in leg.ip.network for leg in legs):
                nets = ", ".join(str(leg.ip.network) for leg in legs)
                self.bad(f"{here}.via",
                         f"next hop {via} is in none of this node's subnets ({nets})")
                continue
            if dst is not None and via is not None:
                out.append((dst, via))
        return tuple(out)

    def middlebox(self, item: Any, where: str) -> Middlebox | None:
        m = self.mapping(item, where, ("name", "kind", "inside", "outside"), ("mbps", "routes"))
        if m is None:
            return None
        name = self.name(m.get("name"), f"{where}.name") if "name" in m else None
        kind = self.choice(m.get("kind"), f"{where}.kind", MIDDLEBOX_KINDS) if "kind" in m else None
        mbps = self.number(m.get("mbps"), f"{where}.mbps", optional=True)
        inside = self.leg(m, where, "inside", attach_required=False)
        outside = self.leg(m, where, "outside", attach_required=False)
        legs = [leg for leg in (inside, outside) if leg is not None]
        routes = self.routes(m.get("routes"), f"{where}.routes", legs)
        if inside is not None and outside is not None and not (inside.attach or outside.attach):
            self.bad(where, "neither leg is attached to a switch")
            return None
        if None in (name, kind, inside, outside) or (m.get("mbps") is not None and mbps is None):
            return None
        return Middlebox(name=name, kind=kind, inside=inside,  # type: ignore[arg-type]
                         outside=outside, mbps=mbps, routes=routes)  # type: ignore[arg-type]

    def edge(self, item: Any) -> EdgeRouter | None:
        m = self.mapping(item, "edge", ("name", "inside", "outside"), ("routes",))
        if m is None:
            return None
        name = self.name(m.get("name"), "edge.name") if "name" in m else None
        inside = self.leg(m, "edge", "inside", attach_required=True)
        outside = self.leg(m, "edge", "outside", attach_required=False)
        legs = [leg for leg in (inside, outside) if leg is not None]
        routes = self.routes(m.get("routes"), "edge.routes", legs)
        if name is None or inside is None or outside is None:
            return None
        return EdgeRouter(name=name, inside=inside, outside=outside, routes=routes)

    def host(self, item: Any, where: str) -> Host | None:
        m = self.mapping(item, where,
                         ("name", "role", "mac", "ip", "gateway", "attach", "nic_mbps"))
        if m is None:
            return None
        name = self.name(m.get("name"), f"{where}.name") if "name" in m else None
        role = self.choice(m.get("role"), f"{where}.role", HOST_ROLES) if "role" in m else None
        iface = self.interface({k: m[k] for k in ("mac", "ip", "attach") if k in m}, where, True)
        gateway = self.address(m.get("gateway"), f"{where}.gateway") if "gateway" in m else None
        nic = self.number(m.get("nic_mbps"), f"{where}.nic_mbps") if "nic_mbps" in m else None
        if iface is not None and gateway is not None:
            if gateway not in iface.ip.network:
                self.bad(f"{where}.gateway",
                         f"{gateway} is not in the host's subnet {iface.ip.network}")
                gateway = None
            elif gateway == iface.ip.ip:
                self.bad(f"{where}.gateway", "the gateway is the host's own address")
                gateway = None
        if None in (name, role, iface, gateway, nic):
            return None
        self.host_where[name] = where  # type: ignore[index]
        return Host(name=name, role=role, iface=iface,  # type: ignore[arg-type]
                    gateway=gateway, nic_mbps=nic)  # type: ignore[arg-type]

    def link(self, item: Any, where: str) -> Link | None:
        m = self.mapping(item, where, ("a", "b", "mbps"), ("bypass",))
        if m is None:
            return None
        a = self.portref(m.get("a"), f"{where}.a") if "a" in m else None
        b = self.portref(m.get("b"), f"{where}.b") if "b" in m else None
        mbps = self.number(m.get("mbps"), f"{where}.mbps") if "mbps" in m else None
        bypass = m.get("bypass", False)
        if not isinstance(bypass, bool):
            self.bad(f"{where}.bypass", f"expected true or false, got {bypass!r}")
            return None
        if a is not None and b is not None and a.switch == b.switch:
            self.bad(where, f"link connects switch {a.switch} to itself")
            return None
        if a is None or b is None or mbps is None:
            return None
        return Link(a=a, b=b, mbps=mbps, bypass=bypass)

    def lane_pool(self, item: Any, edge: EdgeRouter | None) -> LanePool | None:
        m = self.mapping(item, "lane_pool", ("prefix", "mac"))
        if m is None:
            return None
        prefix = self.network(m.get("prefix"), "lane_pool.prefix") if "prefix" in m else None
        mac = self.mac(m.get("mac"), "lane_pool.mac") if "mac" in m else None
        if prefix is not None and edge is not None:
            inside = edge.inside.ip.network
            if not prefix.subnet_of(inside):
                self.bad("lane_pool.prefix", f"{prefix} is not inside the edge router's inside "
                                             f"subnet {inside}")
            for ip, owner in sorted(self.ips.items()):
                if ip in prefix:
                    self.bad("lane_pool.prefix", f"{prefix} contains {ip}, already used by {owner}")
        if prefix is None or mac is None:
            return None
        return LanePool(prefix=prefix, mac=mac)

    def check_gateways(self, hosts: list[Host], middleboxes: list[Middlebox],
                       edge: EdgeRouter | None) -> None:
        """A gateway must be a modeled router leg: the lab builds it and lanes need its MAC."""
        legs = {leg.ip.ip for mb in middleboxes for leg in (mb.inside, mb.outside)}
        if edge is not None:
            legs |= {edge.inside.ip.ip, edge.outside.ip.ip}
        for host in hosts:
            if host.gateway not in legs:
                self.bad(f"{self.host_where[host.name]}.gateway",
                         f"{host.gateway} is not an address of a middlebox or the edge router")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)
