"""Pre-NAT sightings held a moment for their post-NAT pair (docs/automatic-lanes.md).

Pure (the caller passes the time). The access switch and the border sample a NAT'd connection
independently, so the pre-NAT sighting often reaches the acceptor before any post-NAT one of the
same connection: judged at once it is ``nat_unpaired`` and the flow waits for a later sighting.
``HeldSightings`` keeps such a sighting for ``hold_s`` and hands it back as soon as a post-NAT
sighting of the same destination, port and protocol is noted (``release``), to be judged again
from the start (grant, policy, pairing, the DSCP-nonce watch): holding only changes *when* a
sighting is judged, never what it takes to be laned. Bounded against a flood of sightings that
never pair: at most ``max_held`` in all and ``max_per_source`` per source address (beyond that:
judged at once, as without a hold), each flow held once per ``hold_s``, every entry gone after
``hold_s``.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Literal

from viplanes.domain.sighting import IPAddress, Sighting

HOLD_S = 0.5  # at sFlow 1 in 8 and a 0.5 s window the border's sighting follows within ~0.5 s
MAX_HELD = 256  # the acceptor's default queue size (serve passes its own: VIPLANES_AUTO_QUEUE)
MAX_PER_SOURCE = 16  # one host's many unpaired flows do not crowd out the others

Held = Literal["held", "full", "again", "unholdable"]
_Flow = tuple[IPAddress, IPAddress, int, int, int]  # src, dst, protocol, sport, dport
_Outbound = tuple[IPAddress, int, int]  # dst, dport, protocol: what a post-NAT sighting shares


@dataclass
class _Entry:
    sighting: Sighting
    until: float
    released: bool = False


class HeldSightings:
    """The held pre-NAT sightings, in the order their holds end."""

    def __init__(self, hold_s: float = HOLD_S, max_held: int = MAX_HELD, max_per_source: int = MAX_PER_SOURCE) -> None:
        if hold_s < 0 or max_held < 0 or max_per_source < 0:
            raise ValueError("nat hold: hold_s, max_held and max_per_source must not be negative")
        self.hold_s = hold_s
        self._max = max_held
        self._per_source_max = max_per_source
        self._entries: OrderedDict[_Flow, _Entry] = OrderedDict()
        self._per_source: Counter[IPAddress] = Counter()
        self._by_outbound: dict[_Outbound, set[_Flow]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def hold(self, s: Sighting, now: float) -> Held:
        """Hold ``s`` until ``now + hold_s`` ("held"); else why not: the table or the source's
        share is full ("full"), this flow was held within ``hold_s`` ("again": a released
        sighting judged unpaired once more is not held twice), or the hold is off or ``s`` lacks
        what a pairing needs ("unholdable")."""
        if self.hold_s == 0 or s.src_port is None or s.dst_port is None or s.rate_bps is None:
            return "unholdable"
        flow = (s.src_ip, s.dst_ip, s.protocol, s.src_port, s.dst_port)
        if flow in self._entries:
            return "again"
        if len(self._entries) >= self._max or self._per_source[s.src_ip] >= self._per_source_max:
            return "full"
        self._entries[flow] = _Entry(s, now + self.hold_s)
        self._per_source[s.src_ip] += 1
        self._by_outbound.setdefault((s.dst_ip, s.dst_port, s.protocol), set()).add(flow)
        return "held"

    def release(self, post: Sighting) -> list[Sighting]:
        """The held sightings a post-NAT sighting may pair (same destination, port, protocol),
        each handed back once; their entries stay until their hold ends (``again``)."""
        if post.dst_port is None:
            return []
        flows = self._by_outbound.get((post.dst_ip, post.dst_port, post.protocol), set())
        out: list[Sighting] = []
        for flow in sorted(flows, key=lambda f: self._entries[f].until):
            entry = self._entries[flow]
            if not entry.released:
                entry.released = True
                out.append(entry.sighting)
        return out

    def due(self, now: float) -> list[Sighting]:
        """Drop the entries whose hold has ended; the ones never released (no pair came: the
        caller counts them ``nat_unpaired``)."""
        out: list[Sighting] = []
        while self._entries:
            flow, entry = next(iter(self._entries.items()))
            if entry.until > now:
                break
            del self._entries[flow]
            self._per_source[flow[0]] -= 1
            if self._per_source[flow[0]] <= 0:
                del self._per_source[flow[0]]
            outbound = (flow[1], flow[4], flow[2])
            self._by_outbound[outbound].discard(flow)
            if not self._by_outbound[outbound]:
                del self._by_outbound[outbound]
            if not entry.released:
                out.append(entry.sighting)
        return out
