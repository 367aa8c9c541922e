"""Facts shared by the store, the policy and the data plane.

These are the contract between the northbound side (which decides that a lane exists) and the
controller (which makes switches carry it). Nothing here does I/O and nothing here imports ours.

The lane's destination (contract v2, issue 11)
----------------------------------------------
A lane carries ``src -> every destination in dst_nets x every port in dst_ports`` and the reverse.

- ``dst_nets``: sorted, de-duplicated canonical networks, IPv4 and/or IPv6 ("203.0.113.5/32",
  "198.51.100.0/28", "2001:db8:c::10/128"). A single address is a /32 or /128. Every entry is
  already checked by the policy (inside the grant, outside refused space); families the source
  host has no address of are never present.
- ``dst_ports``: sorted, merged inclusive ranges ``((50000, 51000), (5201, 5201))``. The compiler
  expands them with :func:`viplanes.domain.portmasks.ranges_to_masks` into masked ``tcp_dst``/``udp_dst``
  matches (value, mask).
- ``dst_host``: the DNS name the set came from, for logs only (None for addresses and prefixes).
  When the name's addresses change the lane manager calls ``Dataplane.activate`` again with the
  same ``lane_id`` and the new ``dst_nets``: the data plane must make the lane's flows equal the
  new spec (add the new, delete the gone), exactly as it already does for a re-sent lane.
- ``dst_ip``/``dst_port``: the old single-destination fields. They are filled exactly when the lane
  is one address (of either family) and one port, so code that reads one address and one port
  keeps working; otherwise they are None. Old constructors that pass only ``dst_ip``/``dst_port`` get
  ``dst_nets``/``dst_ports`` filled from them, so both views always agree.
- Source addressing per family: an IPv4 destination is reached from the source host's IPv4
  address (translated to ``nat_ip`` when set); an IPv6 destination from the host's ``ip6`` (never
  translated). ``src_ip`` is the address the lane was requested with (either family).
- Flow budget: ``match_count = mask_count(dst_ports) x len(dst_nets)`` distinct L3/L4 matches per
  direction; with today's stateless compiler (one forward and one reverse rule per hop) a lane costs
  ``2 x hops x match_count`` flows. The API refuses lanes whose ``match_count`` passes the
  operator's limit (VIPLANES_MAX_LANE_MATCHES).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Protocol = Literal["tcp", "udp"]
PortRanges = tuple[tuple[int, int], ...]


def is_decimal(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes "²" (which ``int`` refuses: a 500 where a
    400 was due) and other scripts' digits (which ``int`` reads: input nobody meant)."""
    return text.isascii() and text.isdigit()


def host_net(address: str) -> str:
    """A single address as its one-address network (no parsing: the caller has validated it)."""
    return f"{address}/128" if ":" in address else f"{address}/32"


def single_address(net: str) -> str | None:
    """ "203.0.113.5/32" -> "203.0.113.5"; None for a wider prefix."""
    addr, _, length = net.partition("/")
    full = "128" if ":" in addr else "32"
    return addr if length in ("", full) else None


@dataclass(frozen=True)
class NatMapping:
    """The campus NAT's own translation of one running connection (its outside address and the
    port it chose), learned from the switches' samples and confirmed by counters: a lane that
    takes that connection over must keep showing it to the far end under this address and port
    (docs/automatic-lanes.md, "Taking over a running NAT'd connection")."""

    address: str
    port: int


@dataclass(frozen=True)
class WatchMark:
    """A watch's DSCP mark: count only packets carrying ``match_dscp`` and rewrite it to
    ``set_dscp`` (ECN untouched). The access switch marks the pre-NAT tuple with a nonce, the
    border counts and restores it on the proposed post-NAT tuple: only the switch can put the
    nonce on that connection's packets, so forged samples cannot lend it another's."""

    match_dscp: int
    set_dscp: int


@dataclass(frozen=True)
class FlowWatch:
    """Count one exact IPv4 5-tuple entering ``switch`` on ``in_port`` for a moment, changing
    nothing about where it goes (``Dataplane.watch_counts``): how a NAT mapping learned from
    unauthenticated samples is confirmed over the switches' own channel. ``mark``: also match and
    rewrite DSCP (the mapping's proof; None: count only). ``src_port`` None: any source port, one
    priority below the exact watches (the border's sweep that restores a nonce a connection
    carries out of another NAT port than the proposed one)."""

    switch: str
    in_port: int
    src_ip: str
    dst_ip: str
    protocol: Protocol
    src_port: int | None
    dst_port: int
    mark: WatchMark | None = None


@dataclass(frozen=True)
class LaneSpec:
    """Everything the controller needs to carry one lane; built from the database row.

    ``nat_ip`` is the lane-pool address a private IPv4 source is translated to on the lane (None
    when the source is routable). See the module docstring for the destination fields.
    """

    lane_id: int
    src_ip: str
    dst_ip: str | None
    protocol: Protocol
    dst_port: int | None
    src_port: int | None
    nat_ip: str | None
    expires_at: float  # unix seconds; the data plane derives hard_timeout from it
    rate_mbps: float | None = None
    dst_nets: tuple[str, ...] = ()
    dst_ports: PortRanges = ()
    dst_host: str | None = None
    # a takeover lane (exact 5-tuple, ``nat_ip`` None): translated to the NAT's own mapping
    takeover: NatMapping | None = None

    def __post_init__(self) -> None:
        # keep the old and the new view of the destination in agreement, whichever was given
        if not self.dst_nets and self.dst_ip is not None:
            object.__setattr__(self, "dst_nets", (host_net(self.dst_ip),))
        if not self.dst_ports and self.dst_port is not None:
            object.__setattr__(self, "dst_ports", ((self.dst_port, self.dst_port),))
        if self.dst_ip is None and len(self.dst_nets) == 1:
            object.__setattr__(self, "dst_ip", single_address(self.dst_nets[0]))
        if self.dst_port is None and len(self.dst_ports) == 1 and self.dst_ports[0][0] == self.dst_ports[0][1]:
            object.__setattr__(self, "dst_port", self.dst_ports[0][0])

    @property
    def is_single(self) -> bool:
        """One address and one port: the plainest lane (``dst_ip``/``dst_port`` are set)."""
        return self.dst_ip is not None and self.dst_port is not None


@dataclass(frozen=True)
class ActivationResult:
    """Answer of the data plane to "carry this lane": ok only when every switch confirmed."""

    ok: bool
    reason: str
    latency_s: float
    committed_at: float | None = None  # split deployment: when the controller committed it active
    # ok, but no usable path is left now: carried and held (``interrupted``), ``reason`` says why;
    # the controller carries it on the first path that returns (docs/dataplane.md, "Link failures")
    held: bool = False


@dataclass(frozen=True)
class LaneCounters:
    """Traffic a lane carried, summed over its ingress rules (forward and reverse). ``age_s``:
    how old the reading is when it was not read just now (the split deployment's API serves what
    the master controller last published); None for a live read."""

    packets: int
    bytes: int
    age_s: float | None = None
    # the campus side's own bytes (the lane's forward ingress rule only); None: not read apart.
    # What the idle end counts: the far end, or anyone spoofing it, cannot keep a lane up.
    forward_bytes: int | None = None
