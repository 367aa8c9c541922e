"""Lanes booked ahead: they take no lane-pool address before they start, and a grant books at
most ``BOOKINGS_PER_LANE`` x max_lanes of them.

Before: a booked lane took its pool address at booking and held it until it ended, and max_lanes
counts only lanes whose windows overlap, so a grant with max_lanes=1 could book one short lane per
NAT'd host of its prefix in windows of their own (months ahead) and hold the whole pool while
none of them ran, and book any number of rows."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest

from tests.support.clock import FakeClock
from tests.support.paths import REPO
from tests.support.world import GRANT, World, make_world
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.requests import BOOKINGS_PER_LANE
from viplanes.topologies.loader import load_topology

CAMPUS = REPO / "topologies" / "campus.yaml"


@pytest.fixture
def one_address(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane) -> World:
    """The campus with a lane pool of one address."""
    topo = load_topology(CAMPUS)
    pool = dataclasses.replace(topo.lane_pool, prefix=ipaddress.IPv4Network("198.51.100.192/32"))
    return make_world(sqlite_url, clock, dataplane, dataclasses.replace(topo, lane_pool=pool))


def iso(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()


def test_a_lane_booked_ahead_holds_no_pool_address(one_address: World) -> None:
    w = one_address
    booked = w.lane("alice", start_at=iso(w.clock() + 3600), duration_s=60).get_json()
    assert booked["state"] == "scheduled" and booked["nat_ip"] is None
    now = w.lane("bob", dst_port=9001)  # the one address is free for a lane running now
    assert now.status_code == 201 and now.get_json()["nat_ip"] == "198.51.100.192"


def test_a_booked_lane_that_finds_the_pool_exhausted_fails_and_says_why(one_address: World) -> None:
    w = one_address
    booked = w.lane("alice", start_at=iso(w.clock() + 60), duration_s=600).get_json()
    running = w.lane("bob", dst_port=9001, duration_s=3600).get_json()
    assert running["state"] == "active"
    w.clock.advance(61)
    manager = w.app.extensions["viplanes"].manager
    assert manager.tick()["started"] == 0
    shown = w.client.get(f"/api/v1/lanes/{booked['id']}", headers=w.h("alice")).get_json()
    assert shown["state"] == "failed" and "pool was exhausted" in shown["reason"]
    w.client.post(f"/api/v1/lanes/{running['id']}/release", headers=w.h("bob"))
    again = w.lane("alice", start_at=iso(w.clock() + 60), duration_s=600).get_json()
    w.clock.advance(61)
    assert manager.tick()["started"] == 1
    assert w.dataplane.active[again["id"]].nat_ip == "198.51.100.192"


def test_a_grant_books_at_most_its_share_ahead(world: World) -> None:
    cap = BOOKINGS_PER_LANE * GRANT["max_lanes"]
    for i in range(cap):  # windows of their own: max_lanes alone never refuses them
        r = world.lane("alice", start_at=iso(world.clock() + 3600 * (i + 1)), duration_s=60)
        assert r.status_code == 201, r.get_json()
    r = world.lane("alice", start_at=iso(world.clock() + 3600 * (cap + 1)), duration_s=60)
    body = r.get_json()
    assert r.status_code == 409 and body["error"] == "too_many_bookings" and str(cap) in body["message"]
    assert world.lane("alice").status_code == 201  # a lane now is no booking
