"""The lifecycle clock: a daemon thread that calls ``LaneManager.tick`` every ``interval_s``.

Lanes left in ``installing`` by a crash are activated again only after ``recover_after_s``: the
switches need a few seconds to reconnect to a restarted controller, and activating before that
would fail lanes that are fine (the controller's reconcile installs them meanwhile, since
``desired_lanes`` includes installing lanes).
"""
from __future__ import annotations

import logging
import threading
import time

from viplanes.lanes import LaneManager

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, manager: LaneManager, interval_s: float = 0.5, recover_after_s: float = 10.0) -> None:
        self.manager = manager
        self.interval_s = interval_s
        self.recover_after_s = recover_after_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="viplanes-scheduler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        recover_at: float | None = time.monotonic() + self.recover_after_s
        while not self._stop.wait(self.interval_s):
            try:
                if recover_at is not None and time.monotonic() >= recover_at:
                    recover_at = None
                    if n := self.manager.recover():
                        log.info("re-activated %d lanes left installing by the last run", n)
                self.manager.tick()
            except Exception:  # one bad tick (database hiccup) must not stop the clock
                log.exception("scheduler tick")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
