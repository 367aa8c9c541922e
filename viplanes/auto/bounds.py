"""Per-source token buckets: how many fireflies one address may send the acceptor per second.

A firefly is an unauthenticated UDP datagram; a host that sprays them must cost only its own
budget. The table is capped: when it is full, idle sources (bucket refilled) are dropped first and
a new source is refused while it is still full, so spoofed source addresses cannot grow memory.

A source prefix (/24, /64) also has one bucket for all its addresses (``PREFIX_FACTOR`` times a
source's rate), checked first: one host owns a whole /64, and 4,096 of its addresses each inside
their own bucket once filled the table, so that a new host's first firefly was refused every
second. Now a prefix's flood takes at most ``burst * PREFIX_FACTOR`` live entries at a time.
"""

from __future__ import annotations

import ipaddress
import threading

IPKey = object  # any hashable address
PREFIX_FACTOR = 4.0
V4_PREFIX, V6_PREFIX = 24, 64


def source_prefix(source: object) -> object:
    """The /24 or /64 an address is counted in; anything else (a test's name) as itself."""
    if isinstance(source, ipaddress.IPv4Address | ipaddress.IPv6Address):
        bits = V4_PREFIX if source.version == 4 else V6_PREFIX
        return ipaddress.ip_network(f"{source}/{bits}", strict=False)
    return source


class SourceBound:
    def __init__(self, rate_per_s: float = 5.0, burst: float = 10.0, max_sources: int = 4096) -> None:
        self.rate, self.burst, self.max_sources = rate_per_s, burst, max_sources
        self._buckets: dict[object, tuple[float, float]] = {}  # source -> (tokens, last)
        self._prefixes: dict[object, tuple[float, float]] = {}  # source prefix -> (tokens, last)
        self._lock = threading.Lock()

    def allow(self, source: object, now: float) -> bool:
        """One token of ``source``'s bucket, then one of its prefix's (a source over its own rate
        spends none of its neighbours'; a source its prefix refuses takes no table entry)."""
        with self._lock:
            entry = self._buckets.get(source)
            if entry is None:
                if len(self._buckets) >= self.max_sources and not self._evict_idle(now):
                    return False
                tokens, last = self.burst, now
            else:
                tokens, last = entry
                tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[source] = (tokens, now)
                return False
            prefix = source_prefix(source)
            if prefix != source and not self._take_prefix(prefix, now):
                if entry is not None:
                    self._buckets[source] = (tokens, now)
                return False
            self._buckets[source] = (tokens - 1.0, now)
            return True

    def _take_prefix(self, prefix: object, now: float) -> bool:
        """One token of the prefix's shared bucket (its table capped as the sources' is)."""
        rate, burst = self.rate * PREFIX_FACTOR, self.burst * PREFIX_FACTOR
        tokens, last = self._prefixes.get(prefix, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        if prefix not in self._prefixes and len(self._prefixes) >= self.max_sources:
            full = [k for k, (t, at) in self._prefixes.items() if t + (now - at) * rate >= burst]
            if not full:
                return False
            for k in full:
                del self._prefixes[k]
        if tokens < 1.0:
            self._prefixes[prefix] = (tokens, now)
            return False
        self._prefixes[prefix] = (tokens - 1.0, now)
        return True

    def _evict_idle(self, now: float) -> bool:
        idle = [k for k, (t, last) in self._buckets.items() if t + (now - last) * self.rate >= self.burst]
        for k in idle:
            del self._buckets[k]
        return bool(idle)
