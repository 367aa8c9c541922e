"""Start N threads on one target together and time them: the shape of every quota-race test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def run_together(target: Callable[[int], None], n: int, join_timeout_s: float = 120) -> float:
    """Run ``target(i)`` for i in range(n), each in its own thread; seconds until all joined."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_timeout_s)
    return time.perf_counter() - t0
