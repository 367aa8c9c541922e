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

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterator

BULK_LANES = 1000  # below this a full collection is cheap enough: no freeze
REFREEZE_EVERY_S = 3600.0


class HeapFreezer:
    """When the runtime's long-lived state was last frozen (one per runtime, its ``state.heap``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # one freeze at a time (reconciles run 8 at once)
        self._last_unfreeze: float | None = None
        self.frozen_lanes: int | None = None  # lanes carried at the last freeze

    def grew_by_a_bulk(self, lanes: int) -> bool:
        """Whether ``lanes`` carried lanes are a bulk more than at the last freeze. A restart
        reconciles every switch with the same lanes, compiled (and frozen) once by the warm-up: a
        full collection after each of 140 switch reconciles found nothing new to freeze."""
        if lanes < BULK_LANES:
            return False
        return self.frozen_lanes is None or abs(lanes - self.frozen_lanes) >= BULK_LANES

    def freeze_survivors(self, lanes: int | None = None) -> None:
        """Collect cyclic garbage, then exempt every survivor from later collections. ``lanes``:
        how many lanes are carried now (``grew_by_a_bulk`` compares with it)."""
        with self._lock:
            if lanes is not None:
                self.frozen_lanes = lanes
            now = self._clock()
            if self._last_unfreeze is None or now - self._last_unfreeze >= REFREEZE_EVERY_S:
                gc.unfreeze()  # let the collector see (and free) old cycles once in a while
                self._last_unfreeze = now
            gc.collect()
            gc.freeze()


# The one process-wide state here, because the collector it switches is process-wide: how many
# threads are inside ``gc_held`` (of any runtime) and whether the GC was on before the first.
_held = 0  # threads inside ``gc_held``
_held_lock = threading.Lock()
_enabled_before = True


@contextlib.contextmanager
def gc_held() -> Iterator[None]:
    """The cyclic GC off while any thread is inside (counted), back as it was after the last.

    Why: a restart reconciles 140 switches, 8 at a time, and each reads back thousands of flows;
    those young objects triggered ~300 collections, ~0.45 s of a 3 s restart (counted with a
    ``gc.callbacks`` hook in serve). Reference counting still frees them; only cycle detection waits for the last
    holder. ``compiler.compile_desired`` holds it too (one bulk compile), so a compile and
    reconciles that overlap never turn the GC back on under each other."""
    global _held, _enabled_before
    with _held_lock:
        if not _held:
            _enabled_before = gc.isenabled()
            gc.disable()
        _held += 1
    try:
        yield
    finally:
        with _held_lock:
            _held -= 1
            if not _held and _enabled_before:
                gc.enable()
