"""Typed readers for YAML fields: each checks one value, notes a problem with its field path
(``hosts[1].attach``) and returns None instead of raising, so a file's problems come all at once.

Cross-field state (names, ports, MACs and addresses already taken) lives here too, because
"duplicate" is a property of one value against everything read before it.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

from viplanes.topologies.model import PortRef

_Option = TypeVar("_Option", bound=str)

OFPP_MAX = 0xFFFFFF00  # highest physical OpenFlow 1.3 port number
# Mininet names interfaces NAME-ethN and Linux allows 15 characters.
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,8}$")
MAC_RE = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")
PORTREF_RE = re.compile(r"^([^:\s]+):(\d+)$")


class FieldReader:
    """Reads fields of one file and collects ``FILE: FIELD: problem`` lines."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []
        self.switch_names: set[str] = set()
        self.node_names: dict[str, str] = {}  # name -> field path that defined it
        self.ports: dict[PortRef, str] = {}
        self.macs: dict[str, str] = {}
        self.ips: dict[ipaddress.IPv4Address, str] = {}
        self.ips6: dict[ipaddress.IPv6Address, str] = {}

    def bad(self, where: str, what: str) -> None:
        self.problems.append(f"{self.source}: {where}: {what}")

    def mapping(
        self, value: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.bad(where or "top level", f"expected a mapping, got {kind_of(value)}")
            return None
        for key in value:
            if key not in required and key not in optional:
                allowed = ", ".join(required + optional)
                self.bad(f"{where}.{key}" if where else str(key), f"unknown key (allowed: {allowed})")
        for key in required:
            if key not in value:
                self.bad(where or "top level", f"missing required key '{key}'")
        return value

    def listing(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(where, f"expected a list, got {kind_of(value)}")
            return []
        return value

    def text(self, value: Any, where: str) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.bad(where, f"expected a non-empty string, got {kind_of(value)}")
            return None
        return value

    def number(self, value: Any, where: str, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            self.bad(where, f"expected a positive number, got {value!r}")
            return None
        return float(value)

    def choice(self, value: Any, where: str, options: tuple[_Option, ...]) -> _Option | None:
        """The option ``value`` equals, typed as the options are (a Literal for roles and kinds)."""
        for option in options:
            if value == option:
                return option
        self.bad(where, f"{value!r} is not one of {', '.join(options)}")
        return None

    def name(self, value: Any, where: str) -> str | None:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.bad(
                where,
                f"bad name {value!r}: use a letter then up to 8 letters, digits or _ "
                "(Mininet interface names NAME-ethN must fit 15 characters)",
            )
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

    def iface_ip6(self, value: Any, where: str) -> ipaddress.IPv6Interface | None:
        """A global IPv6 address with its prefix (``2001:db8:1::10/64``): no link-local, unique-local,
        multicast, loopback or mapped address (a v6 host is reached without NAT)."""
        if not isinstance(value, str) or "/" not in value:
            self.bad(where, f"bad IPv6 address {value!r}, expected address/prefix like 2001:db8:1::10/64")
            return None
        try:
            ip = ipaddress.IPv6Interface(value)
        except ValueError as exc:
            self.bad(where, f"bad IPv6 address {value!r}: {exc}")
            return None
        a = ip.ip
        if (
            a.is_link_local
            or a.is_multicast
            or a.is_loopback
            or a.is_unspecified
            or a.ipv4_mapped
            or a in ipaddress.IPv6Network("fc00::/7")
            or a.is_site_local
        ):
            self.bad(
                where,
                f"{a} is not a global unicast address (link-local, unique-local, multicast, "
                "loopback and mapped addresses cannot be a lane end)",
            )
            return None
        if a in self.ips6:
            self.bad(where, f"duplicate address {a} (already used by {self.ips6[a]})")
            return None
        self.ips6[a] = where
        return ip

    def address6(self, value: Any, where: str) -> ipaddress.IPv6Address | None:
        try:
            return ipaddress.IPv6Address(value)
        except (ValueError, TypeError):
            self.bad(where, f"bad IPv6 address {value!r}")
            return None

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

    def items(self, data: dict[str, Any], key: str, build: Callable[[Any, str], Any]) -> list[Any]:
        items = self.listing(data.get(key), key)
        built = [build(item, f"{key}[{i}]") for i, item in enumerate(items)]
        return [b for b in built if b is not None]


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)
