"""The console shows an interrupted lane as such, with the reason naming the links, in the live
lanes table and on the lane's page (issue 42)."""

from __future__ import annotations

from tests.support.ui import post, sign_in
from tests.support.world import World
from viplanes.lanes.interruptions import sync_interruptions

WHY = "no usable path to the edge: s2:3-s3:3 down (port s3:3 down)"
REQUEST = {
    "src_ip": "10.1.0.10",
    "dst_ip": "203.0.113.10",
    "protocol": "tcp",
    "dst_port": "9000",
    "duration_min": "10",
    "purpose": "nightly sync",
}


class ControllerReport:
    def __init__(self, held: dict[int, str]) -> None:
        self.held = held

    def interrupted(self) -> dict[int, str]:
        return dict(self.held)


def test_lane_pages_show_interrupted_and_the_reason(world: World) -> None:
    sign_in(world.client, world.tokens["alice"])
    r = post(world.client, "/ui/mine/request", REQUEST)
    assert r.status_code == 302, r.text
    lane_id = int(r.headers["Location"].rsplit("/", 1)[1])
    ctx = world.app.extensions["viplanes"]
    sync_interruptions(ctx.db, ControllerReport({lane_id: WHY}), ctx.clock)  # type: ignore[arg-type]

    page = world.client.get(f"/ui/lanes/{lane_id}").text
    assert 'class="state state-interrupted">interrupted<' in page, page
    assert f"No usable path: {WHY}. The lane is held" in page
    rows = world.client.get("/ui/lanes/rows?back=mine").text
    assert "state-interrupted" in rows and f'<small class="why">{WHY}</small>' in rows, rows

    sync_interruptions(ctx.db, ControllerReport({}), ctx.clock)  # type: ignore[arg-type]
    rows = world.client.get("/ui/lanes/rows?back=mine").text
    assert "state-active" in rows and 'class="why"' not in rows
