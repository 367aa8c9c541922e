"""An in-memory :class:`~viplanes.dataplane.base.Dataplane`: for tests, demos and API-only runs.

It "carries" a lane by remembering it, so everything above the data plane can be exercised
without Open vSwitch. ``fail_next`` makes the next activation fail with a reason; switch names in
``away`` make it not ready (as if those switches had not reconnected yet); ``watched`` holds the
packet count each watch flow would see (``watch_counts``, keyed by the watch without its DSCP
mark: this plane moves no packets, so it cannot tell a nonce; none given: 0).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from viplanes.dataplane.base import DataplaneDefaults, DesiredLanes
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec


class MemoryDataplane(DataplaneDefaults):
    """Remembers the lanes it carries; nothing is sent early, batched or woken elsewhere."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.active: dict[int, LaneSpec] = {}
        self.source: DesiredLanes | None = None
        self.fail_next: str | None = None
        self.away: list[str] = []
        self.calls: list[tuple[str, int]] = []
        self.watched: dict[FlowWatch, int] = {}
        self.watches: list[FlowWatch] = []  # every watch asked for, in order
        self._lock = threading.Lock()

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        self.source = desired_lanes

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        t0 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.calls.append(("activate", lane.lane_id))
            if self.fail_next is not None:
                reason, self.fail_next = self.fail_next, None
                return ActivationResult(False, reason, time.perf_counter() - t0)
            self.active[lane.lane_id] = lane
        return ActivationResult(True, "installed", time.perf_counter() - t0)

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        with self._lock:
            self.calls.append(("deactivate", lane_id))
            self.active.pop(lane_id, None)

    def counters(self, lane_id: int) -> LaneCounters | None:
        with self._lock:
            return LaneCounters(packets=10, bytes=10_000) if lane_id in self.active else None

    def watch_counts(self, watches: list[FlowWatch], seconds: float) -> list[int] | None:
        with self._lock:
            self.watches += watches
            return [self.watched.get(dataclasses.replace(w, mark=None), 0) for w in watches]

    def unready(self, lane: LaneSpec) -> list[str]:
        return list(self.away)

    def readiness(self) -> dict[str, Any]:
        return {
            "ready": not self.away,
            "switches": [{"name": n, "connected": False, "reconciled": False} for n in self.away],
        }

    def reconcile(self) -> None:
        """What a real controller does on (re)start: carry exactly the desired lanes."""
        if self.source is not None:
            with self._lock:
                self.active = {spec.lane_id: spec for spec in self.source()}
