"""The cheap rejection: which automation-enabled grants could cover a flow, by source prefix.

Grants are bucketed by (family, source prefix length) -> network: a lookup masks the source once
per distinct prefix length present and probes a dict, so a sighting outside every automatic grant
costs a few dict probes whatever the number of grants (tests/unit/auto/test_index.py measures it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from viplanes.auto.policy import PROTOCOLS, AutoPolicy, sampled_floor

IPAddr = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AutoGrant:
    """One automation-enabled grant, as the acceptor needs it."""

    grant_id: int
    principal_id: int
    principal: str
    role: str
    src: tuple[IPNet, ...]
    dst: tuple[IPNet, ...]
    protocols: frozenset[str]
    ports: tuple[tuple[int, int], ...]
    max_duration_s: int
    policy: AutoPolicy

    def covers(self, dst: IPAddr, protocol: int, dst_port: int | None) -> bool:
        """Destination, protocol and port inside the grant (the source matched in the index)."""
        if PROTOCOLS.get(protocol) not in self.protocols or dst_port is None:
            return False
        if not any(dst.version == n.version and dst in n for n in self.dst):
            return False
        return any(lo <= dst_port <= hi for lo, hi in self.ports)


class GrantIndex:
    """Immutable: the acceptor swaps in a new one when the grants change."""

    def __init__(self, grants: list[AutoGrant]) -> None:
        self._buckets: dict[tuple[int, int], dict[int, list[AutoGrant]]] = {}
        for g in grants:
            for net in g.src:
                bucket = self._buckets.setdefault((net.version, net.prefixlen), {})
                bucket.setdefault(int(net.network_address), []).append(g)
        self._lengths = {
            v: [(plen, b, _mask(v, plen)) for (fam, plen), b in sorted(self._buckets.items()) if fam == v]
            for v in (4, 6)
        }
        self.size = len(grants)
        # destinations alone, bucketed the same way: what a post-NAT flow may be paired for
        dsts: dict[tuple[int, int], dict[int, list[AutoGrant]]] = {}
        for g in grants:
            for net in g.dst:
                dsts.setdefault((net.version, net.prefixlen), {}).setdefault(int(net.network_address), []).append(g)
        self._dsts = {
            v: [(nets, _mask(v, plen)) for (fam, plen), nets in sorted(dsts.items()) if fam == v] for v in (4, 6)
        }

    def candidates(self, src: IPAddr, dst: IPAddr, protocol: int, dst_port: int | None) -> list[AutoGrant]:
        """Grants whose source prefixes hold ``src`` and that cover the destination, by id."""
        lengths = self._lengths.get(src.version)
        if not lengths:
            return []
        key = int(src)
        found: dict[int, AutoGrant] = {}
        for _plen, bucket, mask in lengths:
            for g in bucket.get(key & mask, ()):
                if g.grant_id not in found and g.covers(dst, protocol, dst_port):
                    found[g.grant_id] = g
        return [found[k] for k in sorted(found)]

    def may_concern(self, src: IPAddr, dst: IPAddr) -> bool:
        """A detector's prefilter: could a flow src -> dst (any protocol, any port) be inside some
        automation-enabled grant? Everything else is dropped before the detector keeps state."""
        lengths = self._lengths.get(src.version)
        if not lengths:
            return False
        key = int(src)
        for _plen, bucket, mask in lengths:
            for g in bucket.get(key & mask, ()):
                if any(dst.version == n.version and dst in n for n in g.dst):
                    return True
        return False

    def may_reach(self, dst: IPAddr) -> bool:
        """Is ``dst`` a destination of some automation-enabled grant (whatever the source)? The
        prefilter of a flow leaving the campus NAT box, kept only as a pairing candidate."""
        key = int(dst)
        return any(key & mask in nets for nets, mask in self._dsts.get(dst.version, ()))

    def rate_floor(self, src: IPAddr, dst: IPAddr, protocol: int, dst_port: int | None) -> float:
        """A detector's per-flow threshold (bit/s): the lowest rate at which a grant covering the
        flow may lane it (``policy.sampled_floor``), 0 when none covers it. Sighted below it, a
        young flow would only be refused ``below_threshold`` and asked for again too late."""
        return min((sampled_floor(g.policy) for g in self.candidates(src, dst, protocol, dst_port)), default=0.0)

    def rate_floor_to(self, dst: IPAddr, protocol: int, dst_port: int | None) -> float:
        """The same for a flow leaving the campus NAT box (its source no grant names): the lowest
        over the grants to ``dst``, protocol and port from any source."""
        key = int(dst)
        floors = [
            sampled_floor(g.policy)
            for nets, mask in self._dsts.get(dst.version, ())
            for g in nets.get(key & mask, ())
            if g.covers(dst, protocol, dst_port)
        ]
        return min(floors, default=0.0)


def _mask(version: int, plen: int) -> int:
    bits = 32 if version == 4 else 128
    return ((1 << plen) - 1) << (bits - plen) if plen else 0
