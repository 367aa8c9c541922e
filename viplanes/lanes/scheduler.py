"""The lifecycle clock: a daemon thread that calls ``LaneManager.tick`` every ``interval_s`` and
``LaneManager.recover`` every ``recover_every_s``.

Recovery is continuous, not only at start-up: a lane left ``installing`` (a crashed request, a
database outage between the insert and the state update, a switch that was away) is activated by
the next round once its switches are connected and reconciled, so within ``recover_every_s`` plus
an activation. Lanes whose switches are not ready are skipped, so a round never waits on them.
A switch becoming ready wakes this thread (``Dataplane.when_ready``): the tick and recovery run at
once, so the lanes that waited for it start then, still written by this one thread.
"""

from __future__ import annotations

import logging
import threading
import time

from viplanes.lanes.interruptions import Fence, sync_interruptions
from viplanes.lanes.manager import LaneManager

log = logging.getLogger(__name__)

RECOVER_EVERY_S = 2.0


class Scheduler:
    def __init__(
        self,
        manager: LaneManager,
        interval_s: float = 0.5,
        recover_every_s: float = RECOVER_EVERY_S,
        fence: Fence | None = None,
    ) -> None:
        """``fence``: a controller cluster's lease check for lane-state writes (``interruptions``)."""
        self.manager = manager
        self.fence = fence
        self.interval_s = interval_s
        self.recover_every_s = recover_every_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        """Run a tick and a recovery now (a switch became ready); any thread, returns at once."""
        self._wake.set()

    def start(self) -> None:
        self.manager.dataplane.when_ready(self.wake)
        # the first round at once, not a tick later: a new master's switches may have become
        # ready before ``when_ready`` named this thread (their wake-up went nowhere), and the
        # lanes the dead master left ``installing`` are a fail-over's last step (issue 44)
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name="viplanes-scheduler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        recover_at = time.monotonic()
        while not self._stop.is_set():
            if self._wake.wait(self.interval_s):
                self._wake.clear()
                recover_at = 0.0  # the lanes that waited for a switch: now
            if self._stop.is_set():
                return
            try:
                self.manager.tick()
            except Exception:  # one bad tick (database hiccup) must not stop the clock
                log.exception("scheduler tick")
            try:  # lanes held for want of a usable path (docs/dataplane.md, "Link failures")
                sync_interruptions(self.manager.db, self.manager.dataplane, self.manager.clock, self.fence)
            except Exception:
                log.exception("interrupted lanes")
            if time.monotonic() < recover_at:
                continue
            recover_at = time.monotonic() + self.recover_every_s
            try:
                if n := self.manager.recover():
                    log.info("activated %d lanes left installing", n)
            except Exception:
                log.exception("recovery round")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
