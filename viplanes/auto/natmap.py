"""Which address and port the campus NAT gave a running connection, from the switches' samples.

Pure (the caller passes the time). The access switch samples the connection before the NAT
(``10.1.0.10:sport -> 203.0.113.10:dport``), the border after it (``198.51.100.2:nport ->
203.0.113.10:dport``, from the NAT box's port). ``NatPairing`` keeps the recent post-NAT flows
(sightings whose source is a NAT box's outside address) and pairs a pre-NAT sighting with the
post-NAT flows of the same destination, port and protocol, seen within ``window_s``, at a rate
within ``rate_ratio`` of its own. Exactly one candidate: a proposed mapping; none or several: no
lane yet. A proposal is only a claim (sFlow is unauthenticated UDP): before any lane is made two
watch flows (``watches_for``) prove it over OpenFlow: the access switch marks the connection's
packets with a DSCP nonce, the border counts the nonce on the proposed post-NAT tuple (and puts
the original DSCP back), and ``confirmed`` judges the counts (``viplanes.domain.natproof``, with
when to stop reading them; docs/automatic-lanes.md, "Taking over a running NAT'd connection").
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from viplanes.domain.natproof import confirmed as confirmed  # the rule the watch counts meet
from viplanes.domain.sighting import IPAddress, Sighting
from viplanes.domain.values import FlowWatch, NatMapping, Protocol, WatchMark
from viplanes.topologies.model import Topology

PROTOCOL_NAMES: dict[int, Protocol] = {6: "tcp", 17: "udp"}
WINDOW_S = 2.0  # a post-NAT sighting older than this (either way) does not pair
RATE_RATIO = 2.0  # the two estimates agree within a factor of 2 (each is +-30 % at 16 samples)
MAX_CANDIDATES = 1024  # post-NAT flows remembered; the least recently seen goes first

ORIGINAL_DSCP = 0  # the only DSCP a takeover watches: best effort, what bulk transfers send
# the nonces: RFC 2474's pool 2 (xxxx11, "experimental or local use"), never a campus class
NONCES: tuple[int, ...] = tuple(range(3, 64, 4))

Outbound = tuple[IPAddress, int, int]  # (dst, dst_port, protocol) of a post-NAT flow


@dataclass(frozen=True)
class Pairing:
    """The matcher's answer: a mapping, or why not (the acceptor's counter)."""

    mapping: NatMapping | None
    reason: str  # "paired", "nat_unpaired", "nat_ambiguous", "nat_rate_mismatch"


@dataclass
class _Seen:
    rate_bps: float
    at: float


class NatPairing:
    """The recent post-NAT flows (bounded), and the pairing of a pre-NAT sighting with them."""

    def __init__(
        self,
        nat_addresses: frozenset[IPAddress],
        window_s: float = WINDOW_S,
        rate_ratio: float = RATE_RATIO,
        max_candidates: int = MAX_CANDIDATES,
    ) -> None:
        if window_s <= 0 or rate_ratio < 1 or max_candidates < 1:
            raise ValueError("nat pairing: window_s > 0, rate_ratio >= 1, max_candidates >= 1")
        self.nat_addresses = nat_addresses
        self._window_s = window_s
        self._ratio = rate_ratio
        self._max = max_candidates
        # (dst, dport, proto, nat address, nat port) -> last rate and time, in least-recent order
        self._seen: OrderedDict[tuple[IPAddress, int, int, IPAddress, int], _Seen] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def note(self, s: Sighting) -> bool:
        """Remember a post-NAT sighting (source a NAT box's outside address); False when it is
        none or lacks what a pairing needs (ports, a rate)."""
        if s.src_ip not in self.nat_addresses or s.src_port is None or s.dst_port is None or s.rate_bps is None:
            return False
        key = (s.dst_ip, s.dst_port, s.protocol, s.src_ip, s.src_port)
        if key in self._seen:
            self._seen.move_to_end(key)
        elif len(self._seen) >= self._max:
            self._seen.popitem(last=False)
        self._seen[key] = _Seen(s.rate_bps, s.observed_at)
        return True

    def pair(self, s: Sighting) -> Pairing:
        """Pair a pre-NAT sighting (its source a host the NAT translates) with the post-NAT flows."""
        if s.dst_port is None or s.src_port is None or s.rate_bps is None:
            return Pairing(None, "nat_unpaired")
        near = [
            (key, seen)
            for key, seen in self._seen.items()
            if key[:3] == (s.dst_ip, s.dst_port, s.protocol) and abs(seen.at - s.observed_at) <= self._window_s
        ]
        if not near:
            return Pairing(None, "nat_unpaired")
        alike = [key for key, seen in near if _within(seen.rate_bps, s.rate_bps, self._ratio)]
        if not alike:
            return Pairing(None, "nat_rate_mismatch")
        if len(alike) > 1:
            return Pairing(None, "nat_ambiguous")
        key = alike[0]
        return Pairing(NatMapping(str(key[3]), key[4]), "paired")

    def expire(self, now: float) -> None:
        """Forget post-NAT flows not seen within the window (oldest first)."""
        while self._seen:
            key, seen = next(iter(self._seen.items()))
            if now - seen.at <= self._window_s:
                break
            del self._seen[key]


def _within(a: float, b: float, ratio: float) -> bool:
    return a > 0 and b > 0 and max(a, b) <= ratio * min(a, b)


def pick_nonce(original: int = ORIGINAL_DSCP, choose: Callable[[Sequence[int]], int] = secrets.choice) -> int:
    """A DSCP nonce for one watch, at random among ``NONCES`` (not the flow's own DSCP). Knowing
    it helps no forger: the switch sets it only on the watched connection's packets, so another
    connection's tuple counts 0 of it; a host that pre-marks its own packets guesses right 1 time
    in 16 and must then also match the watched connection's packet count."""
    return choose([d for d in NONCES if d != original])


def watches_for(topo: Topology, s: Sighting, mapping: NatMapping, nonce: int) -> list[FlowWatch] | None:
    """The watch flows, upstream first: the pre-NAT tuple from the host's port at its access
    switch (DSCP ``ORIGINAL_DSCP`` -> ``nonce``), the proposed post-NAT tuple from the NAT box's
    port at its switch (``nonce`` -> ``ORIGINAL_DSCP``, the count that confirms), and the sweep
    below it: the same destination from the NAT box, any source port, ``nonce`` ->
    ``ORIGINAL_DSCP`` (a wrong proposal's marked packets leave by another port: they too reach
    the far end as they were sent; its count says how many). None when the topology lacks one."""
    host = topo.host_by_ip(s.src_ip)
    box = next((mb for mb in topo.middleboxes if mb.kind == "nat" and str(mb.outside.ip.ip) == mapping.address), None)
    proto = PROTOCOL_NAMES.get(s.protocol)
    if host is None or host.iface.attach is None or box is None or box.outside.attach is None or proto is None:
        return None
    if s.src_port is None or s.dst_port is None:
        return None
    if nonce == ORIGINAL_DSCP or not 0 <= nonce <= 63:
        raise ValueError(f"DSCP nonce {nonce} is not 0..63 or is the original DSCP")
    mark, restore = WatchMark(ORIGINAL_DSCP, nonce), WatchMark(nonce, ORIGINAL_DSCP)
    dst = str(s.dst_ip)
    at_host, at_box = host.iface.attach, box.outside.attach
    return [
        FlowWatch(at_host.switch, at_host.port, str(s.src_ip), dst, proto, s.src_port, s.dst_port, mark),
        FlowWatch(at_box.switch, at_box.port, mapping.address, dst, proto, mapping.port, s.dst_port, restore),
        FlowWatch(at_box.switch, at_box.port, mapping.address, dst, proto, None, s.dst_port, restore),
    ]
