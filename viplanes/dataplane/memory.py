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
from collections.abc import Callable
from typing import Any

from viplanes.dataplane.base import DesiredLanes, PlaneCapabilities, activate_each
from viplanes.domain.inspection import SwitchView
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec


class MemoryDataplane:
    """Remembers the lanes it carries; nothing is sent early, batched or woken elsewhere."""

    capabilities = PlaneCapabilities()

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

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        return activate_each(self, lanes, timeout_s)

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None] | None:
        return None  # nothing sent early: ``deactivate`` after the commit removes the lane

    def expect_wake(self, payload: str) -> None:
        return None  # nothing waits for another process's answer

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

    def when_ready(self, wake: Callable[[], None]) -> None:
        return None  # no switches: nothing becomes ready

    def interrupted(self) -> dict[int, str]:
        return {}  # no links: nothing interrupted

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        return 0, ()

    def switch_facts(self) -> dict[str, SwitchFacts]:
        return {}  # no switches to learn from

    def openflow_transport(self) -> str | None:
        return None  # no OpenFlow listener

    def switch_view(self) -> SwitchView | None:
        return None  # no switches to show

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def reconcile(self) -> None:
        """What a real controller does on (re)start: carry exactly the desired lanes."""
        if self.source is not None:
            with self._lock:
                self.active = {spec.lane_id: spec for spec in self.source()}
