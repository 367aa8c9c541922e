"""Forged wake-ups on real PostgreSQL (issue 28, item 1): a role with LOGIN and no privilege on
any table NOTIFYs both channels. The controller keeps carrying the lane it was told had ended,
and an API request waiting for a lane is not answered "active" by a forged ``viplanes_done``.
The payloads travel through the server to the real listeners (``Waker``, ``DoneListener``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from tests.support.clock import FakeClock
from tests.support.masterplane import MasterPlane
from tests.support.pgroles import forge, unprivileged
from tests.support.world import World, make_world
from viplanes.cluster.handoff import CHANNEL, DONE_CHANNEL
from viplanes.cluster.node import ControllerNode
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.domain.values import ActivationResult
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def pg_split(pg_cluster, topo) -> Iterator[tuple[World, str]]:
    url = pg_cluster.new_database()
    world = make_world(url, FakeClock(time.time()), MemoryDataplane(), topo)
    try:
        yield world, url
    finally:
        world.app.extensions["viplanes"].db.dispose()


def _lane(world: World, port: int = 9000) -> int:
    r = world.lane(dst_port=port)
    assert r.status_code == 201 and r.json["state"] == "active", r.json
    return int(r.json["id"])


def test_a_forged_done_payload_does_not_answer_a_waiting_request(pg_cluster, pg_split) -> None:
    world, url = pg_split
    lane_id = _lane(world)
    spec = world.dataplane.active[lane_id]
    db = world.app.extensions["viplanes"].db
    with db.write() as s:  # the API committed it; the controller has not answered yet
        s.execute(text("UPDATE lanes SET state = 'installing', activated_at = NULL WHERE id = :i"), {"i": lane_id})
    mallory = unprivileged(pg_cluster, url)
    api_db = Database(url)
    plane = RemoteDataplane(api_db)
    try:
        assert plane.listener.ready.wait(10), "the done listener never listened"
        answer: list[ActivationResult] = []
        waiting = threading.Thread(target=lambda: answer.append(plane.activate(spec, timeout_s=2.0)))
        waiting.start()
        time.sleep(0.3)
        forge(mallory, DONE_CHANNEL, f"{lane_id}=active@1795419573.25")
        forge(mallory, DONE_CHANNEL, ",".join(f"{n}=active" for n in range(lane_id, lane_id + 50)))
        waiting.join(10)
        assert answer and not answer[0].ok, f"a forged NOTIFY answered the request: {answer}"
        assert "no controller confirmed" in answer[0].reason

        # the real outcome, committed with its NOTIFY, is answered at once and from the row
        waiting = threading.Thread(target=lambda: answer.append(plane.activate(spec, timeout_s=5.0)))
        waiting.start()
        time.sleep(0.2)
        with db.write() as s:
            s.execute(
                text("UPDATE lanes SET state = 'active', activated_at = 1800000000.5 WHERE id = :i"), {"i": lane_id}
            )
            s.execute(text("SELECT pg_notify(:c, :p)"), {"c": DONE_CHANNEL, "p": f"{lane_id}=active@1.0"})
        waiting.join(10)
        assert answer[1].ok and answer[1].committed_at == 1800000000.5, answer[1]
    finally:
        plane.stop()
        mallory.close()
        api_db.dispose()


@pytest.fixture
def master(pg_split, topo) -> Iterator[tuple[World, str, ControllerNode, MasterPlane]]:
    world, url = pg_split
    ctl_db = Database(url)
    plane = MasterPlane()
    node = ControllerNode(ctl_db, plane, LaneManager(ctl_db, plane, topo, world.clock), roles=plane)
    try:
        yield world, url, node, plane
    finally:
        node.waker.close()
        ctl_db.dispose()


def _woken(node: ControllerNode, want: str) -> list[str]:
    """Payloads the controller's LISTEN connection received, until ``want`` is among them."""
    got: list[str] = []
    deadline = time.monotonic() + 10
    while want not in got and time.monotonic() < deadline:
        got += node.waker.wait(0.5)
    assert want in got, got
    return got


def test_a_forged_ended_payload_leaves_the_lane_on_the_switches(pg_cluster, master) -> None:
    world, url, node, plane = master
    lane_id = _lane(world)
    plane.active[lane_id] = world.dataplane.active[lane_id]  # the master carries it
    node.waker.wait(0.1)  # LISTEN before the forgery
    mallory = unprivileged(pg_cluster, url)
    try:
        forge(mallory, CHANNEL, f"ended:{lane_id}")
        node.handoff_round(_woken(node, f"ended:{lane_id}"))
        assert lane_id in plane.lanes, "a forged NOTIFY took a live lane off the switches"
        assert ("deactivate", lane_id) not in plane.calls

        # the real end: committed, then woken (what the API does); the row decides, not the payload
        r = world.client.post(f"/api/v1/lanes/{lane_id}/release", headers=world.h("alice"))
        assert r.status_code == 200, r.json
        forge(mallory, CHANNEL, f"ended:{lane_id}")
        node.handoff_round(_woken(node, f"ended:{lane_id}"))
        assert lane_id not in plane.lanes
    finally:
        mallory.close()


def test_the_sweep_brings_back_a_lane_dropped_from_memory(master) -> None:
    world, url, node, plane = master
    lane_id = _lane(world)
    plane.active.pop(lane_id, None)  # carried by nobody, active in the database
    node.handoff_round([])  # the first round sweeps
    assert lane_id in plane.lanes
