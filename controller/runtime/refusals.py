"""Switch connections the controller refused lately, for /readyz and `viplanes doctor`.

Why: a bridge that never connects leaves its cause in serve's log only (an unknown datapath id,
a certificate, a TLS alert), and doctor, reading /readyz, blamed TLS for all of them. The
listener records each refusal here; the readiness report carries the latest few, so doctor names
the real cause: "dpid 174275879763270 connected, not in the topology" means the bridge's
``other-config:datapath-id`` is not set. Peer addresses stay in the log (/readyz is open).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

KEEP = 16
UNKNOWN_DPID, UNAUTHORIZED, TLS, DENIED = "unknown_dpid", "unauthorized", "tls", "denied"


@dataclass(frozen=True)
class Refusal:
    kind: str  # UNKNOWN_DPID, UNAUTHORIZED, TLS or DENIED
    dpid: int | None  # None before the features reply (TLS)
    reason: str
    at: float  # wall-clock seconds, for "how long ago"


class RefusalLog:
    """The latest ``KEEP`` refusals, one per (kind, dpid, reason): a switch retrying every few
    seconds does not push the others out. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._items: deque[Refusal] = deque(maxlen=KEEP)
        self._lock = threading.Lock()

    def record(self, kind: str, dpid: int | None, reason: str) -> None:
        item = Refusal(kind, dpid, reason[:300], self._clock())
        with self._lock:
            for old in list(self._items):
                if (old.kind, old.dpid, old.reason) == (item.kind, item.dpid, item.reason):
                    self._items.remove(old)
            self._items.append(item)

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(r) for r in self._items]
