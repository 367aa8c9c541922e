"""A wake-up carries no authority (issue 28, item 1): the master's hand-off round and sweep act on
committed rows only. SQLite stands in for the shared database here (the payloads are handed to
``handoff_round`` as the LISTEN connection would); tests/integration/test_pg_wakeups.py sends
them through PostgreSQL from a role without any table privilege."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from tests.support.masterplane import MasterPlane
from tests.support.world import World, make_world
from viplanes.cluster.node import ControllerNode
from viplanes.cluster.wakeups import missing_live, not_carried, payload_ids
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database


@pytest.fixture
def split(sqlite_url, clock, topo) -> Iterator[tuple[World, ControllerNode, MasterPlane]]:
    world = make_world(sqlite_url, clock, MemoryDataplane(), topo)  # the API side makes lanes
    ctl_db = Database(sqlite_url)
    plane = MasterPlane()
    manager = LaneManager(ctl_db, plane, topo, clock)
    node = ControllerNode(ctl_db, plane, manager, roles=plane)
    try:
        yield world, node, plane
    finally:
        ctl_db.dispose()
        world.app.extensions["viplanes"].db.dispose()


def _carried_lane(world: World, plane: MasterPlane, port: int = 9000) -> int:
    r = world.lane(dst_port=port)
    assert r.status_code == 201 and r.json["state"] == "active", r.json
    lane_id = r.json["id"]
    plane.active[lane_id] = world.dataplane.active[lane_id]  # the master carries it
    return lane_id


def _set_state(world: World, lane_id: int, state: str) -> None:
    with world.app.extensions["viplanes"].db.write() as s:
        s.execute(text("UPDATE lanes SET state = :s WHERE id = :i"), {"s": state, "i": lane_id})


def test_a_forged_ended_payload_removes_nothing(split) -> None:
    world, node, plane = split
    lane_id = _carried_lane(world, plane)
    node.handoff_round([f"ended:{lane_id}", "ended:999999", "ended:-1", "ended:x", "junk"])
    assert lane_id in plane.lanes, "a NOTIFY alone took a live lane off the switches"
    assert ("deactivate", lane_id) not in plane.calls


def test_an_ended_row_is_removed_when_woken(split) -> None:
    world, node, plane = split
    lane_id = _carried_lane(world, plane)
    _set_state(world, lane_id, "revoked")
    node.handoff_round([f"ended:{lane_id}"])
    assert lane_id not in plane.lanes


def test_the_sweep_sends_again_an_active_lane_memory_lost(split) -> None:
    world, node, plane = split
    kept, lost = _carried_lane(world, plane, 9000), _carried_lane(world, plane, 9001)
    del plane.active[lost]  # dropped by any path: a bug, a forged wake-up on older code
    node.sweep()
    assert set(plane.lanes) == {kept, lost}
    assert plane.calls.count(("activate", kept)) == 0  # what memory still carried is not re-sent


def test_the_sweep_leaves_a_lost_lane_to_its_switch_reconcile(split) -> None:
    """A new master: switches not reconciled yet bring the lanes through them themselves."""
    world, node, plane = split
    lost = _carried_lane(world, plane)
    del plane.active[lost]
    plane.away = ["s1"]
    node.sweep()
    assert lost not in plane.lanes
    plane.away = []
    node.sweep()
    assert lost in plane.lanes


def test_a_lost_lane_the_switches_refuse_is_retried_with_a_back_off(split, monkeypatch) -> None:
    world, node, plane = split
    lost = _carried_lane(world, plane)
    del plane.active[lost]
    now = [1000.0]
    monkeypatch.setattr("viplanes.cluster.node.time.monotonic", lambda: now[0])
    tries = []
    for _ in range(8):  # one sweep a second for 8 s, the switch refusing every time
        plane.fail_next = "switch s1 refused: OFPET_TABLE_FULL"
        node.sweep()
        tries.append(plane.calls.count(("activate", lost)))
        now[0] += 1.0
    assert tries == [1, 2, 2, 3, 3, 3, 3, 4], tries  # at 0, 1, 3 and 7 s: doubling up to a minute
    plane.fail_next = None
    now[0] += 60
    node.sweep()
    assert lost in plane.lanes


def test_the_sweep_does_not_start_installing_lanes(split) -> None:
    """An installing row is ``recover``'s (it records the outcome), not the sweep's."""
    world, node, plane = split
    lane_id = _carried_lane(world, plane)
    del plane.active[lane_id]
    _set_state(world, lane_id, "installing")
    assert missing_live(node.db, [lane_id]) == set()


def test_reads_narrow_to_the_payload_ids(split, clock) -> None:
    world, node, plane = split
    live, ended = _carried_lane(world, plane, 9000), _carried_lane(world, plane, 9001)
    _set_state(world, ended, "released")
    assert payload_ids(["ended:1", "lane:2", "ended:", "ended:3x", "ended:04"], "ended:") == {1, 4}
    assert not_carried(node.db, [live, ended, 424242], clock()) == {ended, 424242}
    clock.advance(3600)  # past their end: the rows no longer ask to be carried
    assert not_carried(node.db, [live], clock()) == {live}


def test_forged_lane_wakeups_answer_a_bounded_number_of_checks(split, monkeypatch) -> None:
    world, node, plane = split
    sent: list[dict[int, str]] = []
    monkeypatch.setattr("viplanes.cluster.handoff.notify_done", lambda s, states, at=None: sent.append(states))
    node.handoff_round([f"lane:{n}" for n in range(1, 5000)])
    assert sent and sum(len(states) for states in sent) <= 256  # node.UNHEARD_MAX
