"""The Grafana dashboard queries only metrics the app exports, with bounded labels; and
``viplanes_lane_bytes`` sums the live lanes' counters."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.unit.conftest import World

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "viplanes.json"
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
