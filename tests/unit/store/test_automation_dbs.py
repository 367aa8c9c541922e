"""An automatic lane on both databases: the trigger columns ride in PostgreSQL's one-statement
insert (``insert_at_commit``) as in SQLite's; the per-grant count and the end read them back."""

from __future__ import annotations

import json

from sqlalchemy import select

from tests.support.clock import T0
from tests.support.store import campus_topology, principals
from tests.unit.auto.conftest import Mono, sighting
from viplanes.auto.acceptor import Acceptor
from viplanes.auto.policy import AutoPolicy
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.sighting import SightingState
from viplanes.lanes.manager import LaneManager
from viplanes.store import automation as auto
from viplanes.store.models import Grant, Lane


def test_an_automatic_lane_is_recorded_counted_and_ended(db):
    principals(db, ("alice", "researcher"))
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    with db.write() as s:
        gid = s.scalar(select(Grant.id))
        auto.set_policy(s, gid, AutoPolicy(enabled=True, fireflies=True, max_auto_lanes=2), "root", T0)
    acc = Acceptor(mgr, clock=Mono(), nat_sources=frozenset())  # the desktop; NAT rule: test_nat_in_flight
    acc.refresh()
    lane_id = acc.handle(sighting())
    assert lane_id is not None
    with db.read() as s:
        row = s.get(Lane, lane_id)
        assert (row.trigger_kind, row.trigger_grant_id) == ("firefly", gid)
        assert json.loads(row.trigger_detail)["reporter"] == "10.1.0.10"
        assert auto.live_auto_count(s, gid) == 1
    assert acc.handle(sighting(state=SightingState.END)) == lane_id
    with db.read() as s:
        assert s.get(Lane, lane_id).state == "released" and auto.live_auto_count(s, gid) == 0
