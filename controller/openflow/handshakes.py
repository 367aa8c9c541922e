"""Switch connections still in their TLS handshake, so that reconciles can let them finish first.

Why: after a controller restart every switch reconnects at once, and OVS gives a connection about
one second (TCP, TLS and hello) before it drops it and backs off for 2 s, then 4 s. Handshakes
and reconciles share one GIL; with 140 switches, the first reconciles (reading back and comparing
thousands of flows) slowed the handshakes of the rest past that second: 18-42 dropped per restart
and the last switches back 2-6 s late (issue 13). A reconcile can wait a moment; a dropped
handshake costs the switch OVS's backoff. So the listener counts handshakes in flight here, and a
reconcile waits (bounded) until none is.
"""

from __future__ import annotations

import threading

# How long a reconcile waits for the handshakes in flight. Bounded, so that a stream of new
# connections (a flapping switch, a scan of the port) cannot hold reconciles back for good.
ADMISSION_FIRST_S = 2.0


class HandshakeGauge:
    """How many accepted connections have not finished their TLS handshake (running or queued
    for a place); ``wait_idle`` blocks until there are none. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._count

    def enter(self) -> None:
        with self._cond:
            self._count += 1

    def leave(self) -> None:
        with self._cond:
            self._count = max(0, self._count - 1)
            if not self._count:
                self._cond.notify_all()

    def wait_idle(self, timeout_s: float = ADMISSION_FIRST_S) -> bool:
        """True once no handshake is in flight; False when ``timeout_s`` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._count, timeout_s)
