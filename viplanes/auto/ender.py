"""Ends automatic lanes: after ``idle_s`` without traffic from the campus side (read from the
lane's forward counters, the controller's flow stats: the far end's packets, which anyone can
send or spoof, do not keep a lane up), and when their grant's automation or the global switch is off. The grant's
maximum is the lane's own length (its expiry, the scheduler's). All through the lane manager."""

from __future__ import annotations

import logging
import threading

from viplanes.auto.acceptor import system_caller
from viplanes.domain.values import LaneCounters
from viplanes.errors import VipError
from viplanes.lanes.desk import LaneDesk
from viplanes.store import automation as store

log = logging.getLogger(__name__)

THREAD_NAME = "viplanes-auto-idle"


def _campus_bytes(counters: LaneCounters) -> int:
    """The campus side's bytes; both directions' only where the plane cannot read them apart."""
    return counters.forward_bytes if counters.forward_bytes is not None else counters.bytes


class IdleEnder:
    def __init__(self, lanes: LaneDesk, interval_s: float = 1.0) -> None:
        ctx = lanes.context
        self._lanes = lanes
        self._db, self._clock, self._plane = ctx.db, ctx.clock, ctx.dataplane
        self.interval_s = interval_s
        self.ended = 0
        self._seen: dict[int, tuple[int, float]] = {}  # lane -> (bytes, when they last grew)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:
                log.exception("idle check")

    def check(self) -> list[int]:
        """One round: the lanes it ended."""
        now = self._clock()
        with self._db.read() as s:
            lanes = store.live_auto_lanes(s)
            limits = store.idle_limits(s)
        ended = []
        for lane in lanes:
            allowed, idle_s = limits.get(lane.grant_id, (False, 0))
            why = None if allowed else "off"
            if why is None and lane.state == "active":
                counters = self._plane.counters(lane.lane_id)
                seen = self._seen.get(lane.lane_id)
                if counters is None:  # no stats now: no verdict (the lane still ends at its expiry)
                    pass
                elif seen is None or _campus_bytes(counters) != seen[0]:
                    self._seen[lane.lane_id] = (_campus_bytes(counters), now)
                elif now - seen[1] >= idle_s:
                    why = "idle"
            if why is not None and self._end(lane.lane_id, why):
                ended.append(lane.lane_id)
        live = {lane.lane_id for lane in lanes}
        self._seen = {k: v for k, v in self._seen.items() if k in live and k not in ended}
        return ended

    def _end(self, lane_id: int, why: str) -> bool:
        try:
            self._lanes.end(system_caller(why), lane_id, "released" if why == "idle" else "revoked")
        except VipError as exc:
            log.info("end automatic lane %d: %s", lane_id, exc)
            return False
        self.ended += 1
        log.info("automatic lane %d ended (%s)", lane_id, why)
        return True
