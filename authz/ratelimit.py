"""Rate limit for failed authentication, per client address.

In-memory sliding window: correct for the single-process ``viplanes serve``; several API
processes would each keep their own window (a shared store such as the database or Redis would be
needed then). While an address is over the limit, every request from it is refused — valid tokens
included — so a guesser cannot learn which guess was right.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable


class FailedAuthLimiter:
    def __init__(self, max_failures: int = 10, window_s: float = 60.0,
                 clock: Callable[[], float] | None = None, max_clients: int = 10_000) -> None:
        import time

        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock or time.monotonic
        self._max_clients = max_clients
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _trim(self, q: deque[float], now: float) -> None:
        while q and q[0] <= now - self.window_s:
            q.popleft()

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it is not limited."""
        now = self._clock()
        with self._lock:
            q = self._failures.get(client)
            if not q:
                return 0.0
            self._trim(q, now)
            if len(q) < self.max_failures:
                if not q:
                    del self._failures[client]
                return 0.0
            return max(0.0, q[len(q) - self.max_failures] + self.window_s - now)

    def record_failure(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            if client not in self._failures and len(self._failures) >= self._max_clients:
                self._evict(now)
            q = self._failures.setdefault(client, deque())
            self._trim(q, now)
            q.append(now)
            while len(q) > self.max_failures:  # memory stays bounded per client
                q.popleft()

    def _evict(self, now: float) -> None:
        for key in [k for k, q in self._failures.items() if not q or q[-1] <= now - self.window_s]:
            del self._failures[key]
        if len(self._failures) >= self._max_clients:  # still full: drop the oldest quarter
            oldest = sorted(self._failures, key=lambda k: self._failures[k][-1])
            for key in oldest[: self._max_clients // 4]:
                del self._failures[key]
