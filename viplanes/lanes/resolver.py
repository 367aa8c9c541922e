"""Host names -> all their A/AAAA addresses and how long they may be trusted (the record TTL).

A cloud storage endpoint resolves to many addresses that rotate; a lane to one of them would miss
most connections of a real transfer. The lane manager resolves a ``dst_host`` once at request time
and again whenever the TTL runs out (see ``viplanes.lanes.names``). Injectable: tests pass a
:class:`StaticResolver`. dnspython gives the TTL; without it ``getaddrinfo`` is used with a fixed
TTL, since the system resolver does not report one.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Protocol

FALLBACK_TTL_S = 60.0
# RFC 1123 host name: labels of letters, digits and inner hyphens; at most 253 characters
HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)


class ResolveError(Exception):
    """The name has no usable address (NXDOMAIN, no A/AAAA, timeout); the message says which."""


@dataclass(frozen=True)
class Resolution:
    addresses: tuple[str, ...]  # canonical, sorted, v4 and v6 mixed
    ttl_s: float


class Resolver(Protocol):
    def resolve(self, name: str) -> Resolution:
        """All A and AAAA addresses of ``name``; raises ResolveError."""


def canonical(addresses: list[str] | set[str] | tuple[str, ...]) -> tuple[str, ...]:
    parsed = {ipaddress.ip_address(a) for a in addresses}
    return tuple(str(a) for a in sorted(parsed, key=lambda a: (a.version, a)))


def is_host_name(name: str) -> bool:
    if not HOST_NAME.fullmatch(name):
        return False
    try:  # "10.0.0.1" is an address, not a name
        ipaddress.ip_address(name)
        return False
    except ValueError:
        return True


class DnsResolver:
    """dnspython: A and AAAA asked separately; the lowest TTL of the answers is the lane's."""

    def __init__(self, timeout_s: float = 3.0, server: str = "") -> None:
        import dns.resolver

        self._dns = dns.resolver
        server = server.strip()
        self.resolver = dns.resolver.Resolver(configure=not server)
        if server:  # "HOST" or "HOST:PORT" ("[v6]:PORT"): the lab's DNS server, not the machine's
            host, _, port = (
                server.rpartition(":") if server.count(":") == 1 or server.startswith("[") else (server, "", "")
            )
            self.resolver.nameservers = [host.strip("[]") or server]
            self.resolver.port = int(port) if port else 53
        self.resolver.lifetime = timeout_s

    def resolve(self, name: str) -> Resolution:
        import dns.exception

        found: list[str] = []
        ttls: list[float] = []
        errors: list[str] = []
        for rdtype in ("A", "AAAA"):
            try:
                answer = self.resolver.resolve(name, rdtype)
            except (self._dns.NoAnswer, self._dns.NXDOMAIN) as exc:
                errors.append(type(exc).__name__)
                continue
            except (dns.exception.DNSException, OSError) as exc:
                raise ResolveError(f"{name}: {type(exc).__name__}: {exc}") from None
            found += [r.address for r in answer]
            ttls.append(float(answer.rrset.ttl) if answer.rrset is not None else FALLBACK_TTL_S)
        if not found:
            raise ResolveError(f"{name} has no A or AAAA record ({', '.join(errors) or 'empty'})")
        return Resolution(canonical(found), min(ttls))


class SystemResolver:
    """``getaddrinfo``: what the operating system resolves, with a fixed TTL."""

    def __init__(self, ttl_s: float = FALLBACK_TTL_S) -> None:
        self.ttl_s = ttl_s

    def resolve(self, name: str) -> Resolution:
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            raise ResolveError(f"{name}: {exc}") from None
        found = {str(info[4][0]).split("%")[0] for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)}
        if not found:
            raise ResolveError(f"{name} has no IPv4 or IPv6 address")
        return Resolution(canonical(found), self.ttl_s)


class StaticResolver:
    """A table name -> (addresses, ttl), changeable at run time: for tests and offline demos."""

    def __init__(self, table: dict[str, tuple[list[str], float]] | None = None) -> None:
        self.table = dict(table or {})
        self.calls: list[str] = []

    def set(self, name: str, addresses: list[str], ttl_s: float = 60.0) -> None:
        self.table[name.lower().rstrip(".")] = (addresses, ttl_s)

    def resolve(self, name: str) -> Resolution:
        self.calls.append(name)
        entry = self.table.get(name.lower().rstrip("."))
        if entry is None or not entry[0]:
            raise ResolveError(f"{name} has no A or AAAA record (NXDOMAIN)")
        return Resolution(canonical(entry[0]), entry[1])


def default_resolver(server: str = "") -> Resolver:
    """``server``: VIPLANES_DNS_SERVER ("": the system's resolver)."""
    try:
        return DnsResolver(server=server)
    except Exception:  # dnspython missing, or no /etc/resolv.conf to read
        return SystemResolver()
