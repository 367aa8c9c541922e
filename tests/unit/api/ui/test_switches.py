"""Switches, a lane's flows and drift in the console, over a real LaneRuntime whose switches are
the flow-table simulator (tests/support/fake_switches.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.ui import post, sign_in
from tests.support.world import make_world
from viplanes.controller.compile import lane as compiler
from viplanes.store.models import Lane


@pytest.fixture
def wired(tmp_path: Path, topo):
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    runtime = inline_runtime(topo, clock, switches, base_flows=True)
    world = make_world(f"sqlite:///{tmp_path / 'ui.db'}", clock, runtime, topo)
    runtime.attach_source(world.app.extensions["viplanes"].manager.desired_lanes)
    yield world, switches, runtime
    world.app.extensions["viplanes"].db.dispose()


def _lane(world, client, port: int = 9000) -> int:
    r = post(
        client,
        "/ui/mine/request",
        {
            "src_ip": "10.1.0.10",
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": str(port),
            "duration_min": "10",
            "purpose": "sync",
        },
    )
    assert r.status_code == 302, r.text
    return int(r.headers["Location"].rsplit("/", 1)[1])


def test_switches_page_shows_connection_flows_and_last_reconcile(wired):
    world, switches, runtime = wired
    runtime.connected.discard(4)
    sign_in(world.client, world.tokens["root"])
    page = world.client.get("/ui/switches").text
    assert page.count(">connected<") == 3 and page.count(">not connected<") == 1
    assert "kept 0, added" in page and "border" in page and ">equal<" in page


def test_lane_detail_reads_its_flows_from_each_switch(wired):
    world, switches, runtime = wired
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    lane_id = _lane(world, alice)
    sign_in(world.client, world.tokens["root"])
    page = world.client.get(f"/ui/lanes/{lane_id}").text
    assert page.count("<h3>") == 4 and "ipv4_dst=203.0.113.10" in page and "tcp_dst=9000" in page
    assert "No flows of this lane" in page  # s4 is not on the lane's path
    assert "Flows on the switches" not in alice.get(f"/ui/lanes/{lane_id}").text  # operators only


def test_drift_finds_missing_and_orphan_flows_and_reconcile_now_repairs(wired):
    world, switches, runtime = wired
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    kept, gone = _lane(world, alice), _lane(world, alice, 9001)
    sign_in(world.client, world.tokens["root"])
    assert "No drift" in world.client.get("/ui/drift").text
    # behind the controller's back: lane `kept` loses its flows on the switches, and lane `gone`
    # ends in the database while its flows stay
    for dpid, msgs in compiler.compile_lane_removal(kept, sorted(switches.net.tables)).items():
        for msg in msgs:
            switches.net.tables[dpid].apply(msg, world.clock())
    with world.app.extensions["viplanes"].db.write() as s:
        s.execute(update(Lane).where(Lane.id == gone).values(state="released"))
    page = world.client.get("/ui/drift").text
    assert f"Lane {kept}</a>: s1: " in page and "missing" in page
    assert f"of lane {gone}, which is not live" in page
    r = post(world.client, "/ui/drift")
    assert "Reconciled:" in r.text and "No drift" in r.text
    assert "switch.reconcile" in world.client.get("/ui/audit").text
