"""The console's Switches page lists every declared link with its live state and why (issue 42),
and /metrics carries the same as viplanes_link_up."""

from __future__ import annotations

from pathlib import Path

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.ui import sign_in
from tests.support.world import make_world


def test_switches_page_names_a_down_link(tmp_path: Path, topo) -> None:
    clock = FakeClock()
    runtime = inline_runtime(topo, clock, FakeSwitches(topo, clock), base_flows=True)
    world = make_world(f"sqlite:///{tmp_path / 'ui.db'}", clock, runtime, topo)
    try:
        runtime.port_status(3, 3, up=False)  # the campus's bypass link, at the border
        sign_in(world.client, world.tokens["root"])
        page = world.client.get("/ui/switches").text
        assert "<h2>Links</h2>" in page
        assert "s2:3-s3:3" in page and "port s3:3 down" in page
        assert 'viplanes_link_up{link="s2:3-s3:3"} 0.0' in world.client.get("/metrics").text
    finally:
        world.app.extensions["viplanes"].db.dispose()
