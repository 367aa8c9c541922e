"""The sweep that ends lanes whose group membership evidence ran out (viplanes/domain/memberships.py).

A thread next to the scheduler: every ``interval_s`` it looks (one read) for live lanes under a
group grant with no fresh evidence, and ends them through the store and the lane manager, which
takes them off the switches, each audited with the group named.
"""

from __future__ import annotations

import logging
import threading

from viplanes.lanes.manager import LaneManager
from viplanes.store.memberships import any_lapsed, end_lapsed

log = logging.getLogger(__name__)

SWEEP_S = 10.0


class MembershipSweeper:
    def __init__(self, manager: LaneManager, interval_s: float = SWEEP_S) -> None:
        self.manager = manager
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> list[int]:
        """One round: the ids of the lanes it ended."""
        now = self.manager.clock()
        with self.manager.db.read() as s:
            if not any_lapsed(s, now):
                return []
        with self.manager.db.write() as s:
            ended = end_lapsed(s, now)
        if ended:
            log.info("ended lanes %s: group membership not renewed", ended)
            self.manager.revoke_lanes(ended)
        return ended

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="viplanes-membership-sweep", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep()
            except Exception:  # a database hiccup must not stop the sweeps
                log.exception("membership sweep")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
