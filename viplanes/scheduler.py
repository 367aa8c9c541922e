"""The lifecycle clock: a daemon thread that calls ``LaneManager.tick`` every ``interval_s``."""
from __future__ import annotations

import logging
import threading

from viplanes.lanes import LaneManager

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, manager: LaneManager, interval_s: float = 0.5) -> None:
        self.manager = manager
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.manager.recover()
        self._thread = threading.Thread(target=self._run, name="viplanes-scheduler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.manager.tick()
            except Exception:  # one bad tick (database hiccup) must not stop the clock
                log.exception("scheduler tick")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
