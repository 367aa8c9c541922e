"""Connections that have not proven anything yet: a cap per source prefix and in total, with the
biggest prefix giving way when the total is full. Pure: no sockets (the listener closes what
``enter`` tells it to).

Why: before its TLS handshake ends a peer has shown no certificate, so it must not be able to
take places a switch needs. Idle connections from two addresses once held the listener at its
whole connection cap and a real switch was refused on 16 of 17 reconnects (issue 28). Here such
connections have their own small budget (``total``), apart from the switches already admitted,
and no prefix may hold more than ``per_prefix`` of it. Counting by prefix (/24, /64), not by
address: one host owns a whole IPv6 /64, and a /24 is the least a campus hands one party.

When the budget is full, a newcomer does not simply lose: the prefix holding the most places
(ties: the one whose connection is oldest) gives up its oldest connection, unless that prefix is
the newcomer's own or holds no more than it. A flood therefore only ever displaces itself, while
a switch's prefix, holding one or two places for the milliseconds a handshake takes, is never the
biggest. Only a flood from more prefixes than ``total`` could make the switch's connection the
victim, and then only if it is also the oldest in a tie.

A prefix is not one party: an attacker at 127.0.0.2 filled 127.0.0.0/24's places and the switch at
127.0.0.1 got 0 of 17 reconnects. So the addresses that have brought a switch through its TLS
handshake before (``known``, told by the listener) keep a way in: a known address's newcomer
takes the oldest place of an address that is not known, in its own prefix when that is full, or
anywhere when the total is (and, when its prefix holds only known addresses' places, as from a
local process connecting from the switch's own address, the prefix's oldest place: a handshake
takes milliseconds, an idle connection sits there). Nobody else's connection can evict a known
address's place by size. Becoming known takes a certificate the campus CA signed.
"""

from __future__ import annotations

import collections
import ipaddress
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

V4_PREFIX = 24
V6_PREFIX = 64
KNOWN_MAX = 4096  # addresses remembered as known switches (oldest forgotten first)


def plain_address(address: str) -> str:
    """The address as one spelling: an IPv4-mapped IPv6 address as its IPv4 address, no zone;
    an unparsable one as itself."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


def prefix_of(address: str, v4_bits: int = V4_PREFIX, v6_bits: int = V6_PREFIX) -> str:
    """The network a source address is counted in ("10.1.2.0/24", "2001:db8::/64"). An
    IPv4-mapped IPv6 address counts as its IPv4 address; an unparsable one as itself."""
    try:
        ip = ipaddress.ip_address(plain_address(address))
    except ValueError:
        return address
    bits = v4_bits if ip.version == 4 else v6_bits
    return str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))


@dataclass
class Ticket:
    """One connection's place; ``evicted`` is set when another took it (the holder must close)."""

    source: str
    prefix: str
    seq: int
    evicted: bool = False
    known: bool = False  # from an address that brought a switch through its handshake before


@dataclass(frozen=True)
class Entry:
    """What ``enter`` decided: ``ticket`` None means refused (``reason`` says why); ``evict``
    lists the places given up for it (already no longer counted)."""

    ticket: Ticket | None
    evict: tuple[Ticket, ...] = ()
    reason: str = ""


@dataclass
class Unfinished:
    """Places of connections not through their TLS handshake (the caller holds a lock)."""

    total: int
    per_prefix: int
    v4_bits: int = V4_PREFIX
    v6_bits: int = V6_PREFIX
    by_prefix: dict[str, collections.OrderedDict[int, Ticket]] = field(default_factory=dict)
    evicted_count: int = 0
    refused_count: int = 0
    known: collections.OrderedDict[str, None] = field(default_factory=collections.OrderedDict)
    _seq: itertools.count = field(default_factory=itertools.count)

    @property
    def count(self) -> int:
        return sum(len(held) for held in self.by_prefix.values())

    def mark_known(self, source: str) -> None:
        """``source`` brought a switch through its TLS handshake: its newcomers keep a way in."""
        address = plain_address(source)
        self.known[address] = None
        self.known.move_to_end(address)
        while len(self.known) > KNOWN_MAX:
            self.known.popitem(last=False)

    def enter(self, source: str) -> Entry:
        """A place for a new connection from ``source``, maybe by evicting one of a bigger prefix
        (or, for a known switch address, a stranger's: module docstring)."""
        prefix = prefix_of(source, self.v4_bits, self.v6_bits)
        known = plain_address(source) in self.known
        mine = len(self.by_prefix.get(prefix, ()))
        evicted: list[Ticket] = []
        if mine >= self.per_prefix:
            stranger = (self._stranger(prefix) or self._oldest(prefix)) if known else None
            if stranger is None:
                self.refused_count += 1
                return Entry(None, reason=f"{mine} unfinished handshakes from {prefix}")
            evicted.append(self._evict(stranger))
            mine -= 1
        if self.count >= self.total:
            victim = self._victim(prefix, mine) or (self._stranger(None) if known else None)
            if victim is None:
                self.refused_count += 1
                return Entry(None, reason=f"{self.total} unfinished handshakes in all")
            evicted.append(self._evict(victim))
        ticket = Ticket(source, prefix, next(self._seq), known=known)
        self.by_prefix.setdefault(prefix, collections.OrderedDict())[ticket.seq] = ticket
        return Entry(ticket, tuple(evicted))

    def _evict(self, victim: Ticket) -> Ticket:
        self._remove(victim)
        victim.evicted = True
        self.evicted_count += 1
        return victim

    def _oldest(self, prefix: str) -> Ticket | None:
        held = self.by_prefix.get(prefix)
        return next(iter(held.values())) if held else None

    def _stranger(self, prefix: str | None) -> Ticket | None:
        """The oldest place of an address not known, in ``prefix`` (None: in any prefix)."""
        if prefix is None:
            pools = list(self.by_prefix.values())
        else:
            pools = [self.by_prefix[prefix]] if prefix in self.by_prefix else []
        oldest: Ticket | None = None
        for held in pools:
            for ticket in held.values():  # oldest first
                if not ticket.known:
                    if oldest is None or ticket.seq < oldest.seq:
                        oldest = ticket
                    break
        return oldest

    def _victim(self, prefix: str, mine: int) -> Ticket | None:
        """The oldest place of the biggest prefix other than ``prefix`` holding more than ``mine``."""
        best: Ticket | None = None
        best_size = mine
        for other, held in self.by_prefix.items():
            if other == prefix or not held:
                continue
            oldest = next(iter(held.values()))
            if oldest.known:  # only a known switch's newcomer displaces by address (``_stranger``)
                oldest = next((t for t in held.values() if not t.known), oldest)
            if oldest.known:
                continue
            if len(held) > best_size or (best is not None and len(held) == best_size and oldest.seq < best.seq):
                best, best_size = oldest, len(held)
        return best

    def _remove(self, ticket: Ticket) -> bool:
        held = self.by_prefix.get(ticket.prefix)
        if held is None or held.pop(ticket.seq, None) is None:
            return False
        if not held:
            del self.by_prefix[ticket.prefix]
        return True

    def leave(self, ticket: Ticket) -> None:
        """The connection finished its handshake or closed (idempotent; a no-op once evicted)."""
        self._remove(ticket)


class LogBudget:
    """At most ``per_window`` log lines per ``window_s``; the rest are counted and the count goes
    with the next line allowed. Why: every refused connection of a flood logged a WARNING (40,000
    lines in 40 s, a disk filled by whoever can reach the port)."""

    def __init__(self, per_window: int = 20, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.per_window, self.window_s, self.clock = per_window, window_s, clock
        self._start = clock()
        self._logged = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[bool, int]:
        """(log this one?, how many were not logged since the last line that was)."""
        with self._lock:
            now = self.clock()
            if now - self._start >= self.window_s:
                self._start, self._logged = now, 0
            if self._logged >= self.per_window:
                self._suppressed += 1
                return False, 0
            self._logged += 1
            suppressed, self._suppressed = self._suppressed, 0
            return True, suppressed
