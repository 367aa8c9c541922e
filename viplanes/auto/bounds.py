"""Per-source token buckets: how many fireflies one address may send the acceptor per second.

A firefly is an unauthenticated UDP datagram; a host that sprays them must cost only its own
budget. The table is capped: when it is full, idle sources (bucket refilled) are dropped first and
a new source is refused while it is still full, so spoofed source addresses cannot grow memory.
"""

from __future__ import annotations

import threading

IPKey = object  # any hashable address


class SourceBound:
    def __init__(self, rate_per_s: float = 5.0, burst: float = 10.0, max_sources: int = 4096) -> None:
        self.rate, self.burst, self.max_sources = rate_per_s, burst, max_sources
        self._buckets: dict[object, tuple[float, float]] = {}  # source -> (tokens, last)
        self._lock = threading.Lock()

    def allow(self, source: object, now: float) -> bool:
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
            self._buckets[source] = (tokens - 1.0, now)
            return True

    def _evict_idle(self, now: float) -> bool:
        idle = [k for k, (t, last) in self._buckets.items() if t + (now - last) * self.rate >= self.burst]
        for k in idle:
            del self._buckets[k]
        return bool(idle)
