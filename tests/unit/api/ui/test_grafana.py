"""The Grafana dashboard queries only metrics the app exports, with bounded labels; and
``viplanes_lane_bytes`` sums the live lanes' counters."""

from __future__ import annotations

import json
import re

from tests.support.paths import REPO
from tests.support.world import World

DASHBOARD = REPO / "docs" / "grafana" / "viplanes.json"
BOUNDED_LABELS = {"state", "outcome", "decision", "code", "le"}


def test_dashboard_uses_exported_metrics_and_bounded_labels(world: World):
    r = world.lane()
    assert r.status_code == 201
    exposed = world.client.get("/metrics").text
    names = set(re.findall(r"^(viplanes_\w+?)(?:\{| )", exposed, re.M))
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for metric in re.findall(r"viplanes_\w+", expr):
            assert metric in names, f"{metric} is not exported (have {sorted(names)})"
        for labels in re.findall(r"by \(([^)]*)\)", expr):
            assert {x.strip() for x in labels.split(",")} <= BOUNDED_LABELS, expr
    assert "viplanes_lane_bytes 10000.0" in exposed  # the memory plane's counters, one lane


class CountingPlane:
    """Counts the data-plane reads a scrape makes."""

    def __init__(self) -> None:
        self.reads = 0

    def counters(self, lane_id: int):  # type: ignore[no-untyped-def]
        self.reads += 1
        from viplanes.domain.values import LaneCounters

        return LaneCounters(packets=1, bytes=100)


class ThreeLanes:
    def desired_lanes(self):  # type: ignore[no-untyped-def]
        from viplanes.domain.values import LaneSpec

        return [LaneSpec(i, "10.1.0.10", "203.0.113.10", "tcp", 9000 + i, None, None, 2e9) for i in (1, 2, 3)]


def test_anonymous_scrapes_cost_one_reading_per_interval():
    """/metrics needs no token: a flood of scrapes must not become a flood of switch reads."""
    import threading

    from prometheus_client import CollectorRegistry, generate_latest

    from api.ui.lanebytes import LaneBytes

    now = [100.0]
    plane = CountingPlane()
    registry = CollectorRegistry()
    registry.register(LaneBytes(ThreeLanes(), plane, clock=lambda: now[0], min_interval_s=5.0))
    scrapes = [threading.Thread(target=generate_latest, args=(registry,)) for _ in range(20)]
    for t in scrapes:
        t.start()
    for t in scrapes:
        t.join()
    assert plane.reads == 3  # one reading of the three lanes, shared by 20 scrapes
    assert b"viplanes_lane_bytes 300.0" in generate_latest(registry)
    now[0] += 4.9
    generate_latest(registry)
    assert plane.reads == 3
    now[0] += 0.1
    generate_latest(registry)
    assert plane.reads == 6
