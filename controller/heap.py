"""Keep long-lived controller state out of the cyclic garbage collector's way.

With 10,000 lanes the controller holds about a million long-lived objects (compiled lanes, their
messages, flow identities). Every full collection walks all of them, which made a switch's
reconnect 3.1-3.3 s instead of 1.3-1.5 s (docs/benchmarks.md, "The cyclic garbage collector at
10,000 lanes"). After a bulk of such objects is built we collect once and ``gc.freeze()`` the
survivors: later collections skip them; reference counting still frees them when dropped.

Frozen objects that later become part of unreachable cycles are not found until they are
unfrozen, so once an hour (at most) the freeze starts over with a full collection.
"""
from __future__ import annotations

import gc
import threading
import time
from typing import Callable

BULK_LANES = 1000  # below this a full collection is cheap enough: no freeze
REFREEZE_EVERY_S = 3600.0

_lock = threading.Lock()
_last_unfreeze: float | None = None


def freeze_survivors(clock: Callable[[], float] = time.monotonic) -> None:
    """Collect cyclic garbage, then exempt every survivor from later collections."""
    global _last_unfreeze
    with _lock:
        now = clock()
        if _last_unfreeze is None or now - _last_unfreeze >= REFREEZE_EVERY_S:
            gc.unfreeze()  # let the collector see (and free) old cycles once in a while
            _last_unfreeze = now
        gc.collect()
        gc.freeze()
