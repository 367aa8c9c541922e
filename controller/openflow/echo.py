"""One thread asks every silent switch connection for an echo (issue 13).

os-ken runs an echo loop per connection: a thread per switch, and an echo round trip per switch
per ``echo_request_interval`` whether or not the switch talks. On a campus of 140 switches that is
140 threads waking and ~10 round trips a second, background CPU that grows with the campus. Here
one daemon thread per listener looks at every registered connection once per ``TICK_S`` and calls its
``echo_tick``, which sends an echo only when the peer has been silent for the interval (OVS sends
its own echo request after 5 s without a message from us, so a live OVS switch never needs one)
and drops a peer that leaves too many unanswered.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

LOG = logging.getLogger("viplanes.controller.openflow.server")
TICK_S = 1.0  # how late a silent peer may get its echo; a dead one is dropped within a tick


class EchoPeer(Protocol):
    def echo_tick(self, now: float) -> None: ...


class EchoSweeper:
    """The registered connections' echo checks, on one thread started at the first ``add``."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self._peers: set[EchoPeer] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def add(self, peer: EchoPeer) -> None:
        with self._lock:
            self._peers.add(peer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="viplanes-echo", daemon=True)
                self._thread.start()

    def discard(self, peer: EchoPeer) -> None:
        with self._lock:
            self._peers.discard(peer)

    def sweep(self, now: float | None = None) -> None:
        """One look at every connection (the thread's tick; tests call it directly)."""
        with self._lock:
            peers = list(self._peers)
        now = time.monotonic() if now is None else now
        for peer in peers:
            try:
                peer.echo_tick(now)
            except Exception:
                LOG.exception("echo check of %r failed", peer)

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.sweep()

    def stop(self) -> None:
        """End the thread (the listener closed); it does not start again."""
        self._stop.set()
