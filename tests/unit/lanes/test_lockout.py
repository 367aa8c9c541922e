"""Locking a principal out closes its holes (issue 28, item 8): disabling it, or revoking the
grant its lanes rest on, ends its live lanes at once AND cancels its bookings, so a booking made
before the disable never becomes active when it comes due; the audit names every lane."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support.world import World
from viplanes.store import records as store
from viplanes.store.models import Lane


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()


def _lock_out(w: World, how: str) -> tuple[dict, str]:
    """Disable alice, or revoke her grant: the answer and the audit action it writes."""
    if how == "disable":
        r = w.client.post("/api/v1/principals/alice/disable", headers=w.h("root"))
        return r.get_json(), "principal.disable"
    r = w.client.post(f"/api/v1/grants/{w.grants['alice']}/revoke", headers=w.h("root"))
    return r.get_json(), "grant.revoke"


@pytest.mark.parametrize("how", ["disable", "revoke_grant"])
def test_a_booking_made_before_the_lockout_never_becomes_active(world: World, how: str) -> None:
    w = world
    live = w.lane("alice").get_json()
    booked = w.lane("alice", dst_port=9001, start_at=iso(w.clock() + 3600), duration_s=600).get_json()
    assert live["state"] == "active" and booked["state"] == "scheduled"
    bobs = w.lane("bob", dst_port=9002).get_json()  # someone else's lane is not touched

    answer, action = _lock_out(w, how)
    assert sorted(answer["revoked_lanes"]) == sorted([live["id"], booked["id"]]), answer
    assert live["id"] not in w.dataplane.active and bobs["id"] in w.dataplane.active

    manager = w.app.extensions["viplanes"].manager
    for _ in range(3):  # its start passes, the scheduler ticks
        w.clock.advance(1800)
        manager.tick()
    assert ("activate", booked["id"]) not in w.dataplane.calls
    db = w.app.extensions["viplanes"].db
    with db.read() as s:
        states = {lane.id: (lane.state, lane.reason) for lane in s.query(Lane)}
    assert states[booked["id"]][0] == "revoked" and states[live["id"]][0] == "revoked"
    assert "disabled" in states[booked["id"]][1] or "revoked" in states[booked["id"]][1]

    if how == "disable":  # enabling the account again does not bring the booking back
        with w.app.extensions["viplanes"].db.write() as s:
            store.set_disabled(s, "alice", False)
        w.clock.advance(60)
        manager.tick()
        assert ("activate", booked["id"]) not in w.dataplane.calls

    rows = w.client.get(f"/api/v1/audit?action={action}", headers=w.h("root")).get_json()
    assert rows and str(live["id"]) in rows[0]["reason"] and str(booked["id"]) in rows[0]["reason"], rows
    for lane_id in (live["id"], booked["id"]):  # and each lane's own history says why it ended
        history = w.client.get(f"/api/v1/audit?target=lane:{lane_id}", headers=w.h("root")).get_json()
        assert any(r["action"] == "lane.revoke" and r["actor"] == "root" for r in history), history
