"""What the switches said about themselves (issue 31), shown on the console's Switches page and
in /metrics: a switch's table-full count and the contradictions of its declared profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.ui import sign_in
from tests.support.world import make_world


@pytest.fixture
def wired(tmp_path: Path, topo):
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    runtime = inline_runtime(topo, clock, switches, base_flows=True)
    world = make_world(f"sqlite:///{tmp_path / 'ui.db'}", clock, runtime, topo)
    yield world, runtime
    world.app.extensions["viplanes"].db.dispose()


def test_switches_page_and_metrics_show_what_switches_said(wired):
    world, runtime = wired
    runtime.facts.features("s1", 1, {0: 1000}, 0)  # a one-table switch declared ovs
    runtime.facts.full("s2", 41)
    sign_in(world.client, world.tokens["root"])
    page = world.client.get("/ui/switches").text
    assert "What the switches report" in page
    assert "profile ovs uses tables 0, 1, 2, 3 but the switch reports 1 table(s)" in page
    assert '<td data-label="Full at" class="num">41</td>' in page
    metrics = world.client.get("/metrics").text
    assert 'viplanes_switch_full_at{switch="s2"} 41.0' in metrics
    assert 'viplanes_switch_profile_mismatches{switch="s1"} 2.0' in metrics  # tables, meters
