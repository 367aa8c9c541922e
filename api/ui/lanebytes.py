"""``viplanes_lane_bytes``: bytes carried so far by the live lanes, summed, read at scrape time.

No per-lane label (lane ids grow without bound); one series per process. Only the newest
``MAX_LANES`` live lanes are read, and at most once per ``MIN_INTERVAL_S`` (scrapes in between,
or at the same time, get the last reading): ``/metrics`` needs no token, and every scrape used to
cost up to 50 flow-stats round trips and a read of every live lane, so anyone who reached the API
port could keep the controller's OpenFlow channels busy. Grafana's ``deriv()`` of it is the
lanes' current throughput (docs/grafana/viplanes.json).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
MAX_LANES = 50
MIN_INTERVAL_S = 5.0  # Prometheus scrapes every 15 s by default


class LaneBytes(Collector):
    def __init__(
        self,
        manager: Any,
        dataplane: Any,
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self.manager, self.dataplane = manager, dataplane
        self.clock, self.min_interval_s = clock, min_interval_s
        self._lock = threading.Lock()  # concurrent scrapes wait for one reading
        self._read_at: float | None = None
        self._reading = (0, 0)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= self.min_interval_s:
                self._reading, self._read_at = self._read(), now
            total, counted = self._reading
        yield GaugeMetricFamily("viplanes_lane_bytes", "Bytes carried so far by the live lanes (summed)", value=total)
        yield GaugeMetricFamily("viplanes_lane_bytes_lanes", "Live lanes whose counters were read", value=counted)

    def _read(self) -> tuple[int, int]:
        total = counted = 0
        try:
            lanes = sorted(self.manager.desired_lanes(), key=lambda ln: ln.lane_id, reverse=True)
            for spec in lanes[:MAX_LANES]:
                counters = self.dataplane.counters(spec.lane_id)
                if counters is not None:
                    total += counters.bytes
                    counted += 1
        except Exception:  # a scrape must not fail because the database or a switch is slow
            log.exception("reading lane counters for /metrics")
        return total, counted
