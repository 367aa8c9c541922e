"""At most N holders at once, waiters let in largest first: the reconcile slots of a restart.

Why an order: after a restart 140 switch reconciles queue for 8 slots. A plain semaphore lets
them in as the threads happen to wake, and in the benchmark's restarts the switches crossed by
every lane (`border`: 4,799 flows to read back and compare, `core`: 2,280) came last, so the
round ended with them running nearly alone (issue 13). Larger first overlaps their long
read-backs with the small switches' work. Among equals, arrival order.
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from typing import Iterator


class PrioritySlots:
    """``with slots.held(priority):`` waits for one of ``n`` slots; a freed slot goes straight
    to the waiter with the highest priority (no wake-up of every waiter)."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._free = n
        self._waiting: list[tuple[int, int, threading.Event]] = []
        self._arrivals = itertools.count()

    @contextlib.contextmanager
    def held(self, priority: int = 0) -> Iterator[None]:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                turn = None
            else:
                turn = threading.Event()
                heapq.heappush(self._waiting, (-priority, next(self._arrivals), turn))
        if turn is not None:
            turn.wait()  # set by ``_release``, which hands its slot over
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                heapq.heappop(self._waiting)[2].set()
            else:
                self._free += 1

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
