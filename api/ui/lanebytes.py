"""``viplanes_lane_bytes``: bytes carried so far by the live lanes, summed, read at scrape time.

No per-lane label (lane ids grow without bound); one series per process. Only the newest
``MAX_LANES`` live lanes are read, so a scrape costs at most that many flow-stats round trips.
Grafana's ``deriv()`` of it is the lanes' current throughput (docs/grafana/viplanes.json).
"""
from __future__ import annotations

import logging
from typing import Any, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
MAX_LANES = 50


class LaneBytes(Collector):
    def __init__(self, manager: Any, dataplane: Any) -> None:
        self.manager, self.dataplane = manager, dataplane

    def collect(self) -> Iterator[GaugeMetricFamily]:
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
        yield GaugeMetricFamily("viplanes_lane_bytes", "Bytes carried so far by the live lanes (summed)",
                                value=total)
        yield GaugeMetricFamily("viplanes_lane_bytes_lanes", "Live lanes whose counters were read",
                                value=counted)
