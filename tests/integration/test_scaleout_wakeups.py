"""The split deployment on real parts (PostgreSQL, two `viplanes controller cluster`, `viplanes
api`, four userspace OVS bridges) against an insider and a lock-out (issue 28, items 1 and 8).

1. A role with LOGIN and no table privilege NOTIFYs ``ended:<id>`` of a live lane (the issue's
   reproduction): its flows stay on every bridge, same flows, never re-added.
2. An operator disables the lane's owner: the live lane's flows leave every bridge, the owner's
   booking is cancelled and never becomes active when it comes due, and the audit names both.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
import requests

from tests.support.pgroles import forge, unprivileged
from tests.support.procs import wait_for
from tests.support.scaleout_kit import db_rows, lane_cookies, lane_flows, request_active
from tests.support.serve import lane_body, setup_researcher
from viplanes.cluster.handoff import CHANNEL, DONE_CHANNEL
from viplanes.controller.compile.cookies import lane_cookie

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_a_forged_ended_leaves_the_lane_on_every_bridge(cluster, pg_cluster) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=5)}"}
    lane = request_active(url, h, 9000, within_s=40)
    lane_id = lane["id"]
    before = {br: lane_flows(br, lane_id) for br in bridges}
    on_path = [br for br, flows in before.items() if flows]
    assert on_path, f"lane {lane_id} has no flows on any bridge"

    mallory = unprivileged(pg_cluster, db)
    try:
        forge(mallory, CHANNEL, f"ended:{lane_id}")
        forge(mallory, DONE_CHANNEL, f"{lane_id}=released")
        time.sleep(4.0)  # the hand-off round at once, then a sweep every second
    finally:
        mallory.close()
    for br in on_path:  # the same flows, not removed and re-added: durations kept growing
        now = lane_flows(br, lane_id)
        assert set(now) == set(before[br]), f"{br}: a forged NOTIFY changed lane {lane_id}'s flows: {now}"
        assert all(now[k] >= before[br][k] + 3.0 for k in now), (before[br], now)
    assert db_rows(db, "SELECT state FROM lanes WHERE id = %s", (lane_id,)) == [("active",)]


def test_a_disable_ends_the_live_lane_and_cancels_the_booking(cluster) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=5)}"}
    lane_id = request_active(url, h, 9000, within_s=40)["id"]
    assert any(lane_flows(br, lane_id) for br in bridges)
    # a booking that comes due in a few seconds, then the owner is locked out
    start = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=6)
    r = requests.post(
        f"{url}/api/v1/lanes", json={**lane_body(9001), "start_at": start.isoformat()}, headers=h, timeout=15
    )
    assert r.status_code == 201 and r.json()["state"] == "scheduled", r.text
    booked = r.json()["id"]
    op = {"Authorization": f"Bearer {cluster['op']}"}
    t0 = time.monotonic()
    r = requests.post(f"{url}/api/v1/principals/alice/disable", headers=op, timeout=15)
    assert r.status_code == 200 and sorted(r.json()["revoked_lanes"]) == sorted([lane_id, booked]), r.text
    assert wait_for(lambda: not any(lane_flows(br, lane_id) for br in bridges), 5.0), "flows stayed after disable"
    print(f"\ndisable -> the lane's flows gone from every bridge in {time.monotonic() - t0:.2f} s")

    time.sleep(max(0.0, (start - dt.datetime.now(dt.UTC)).total_seconds()) + 3.0)  # past its start
    assert all(lane_cookie(booked) not in lane_cookies(br) for br in bridges)
    states = dict(db_rows(db, "SELECT id, state FROM lanes WHERE id IN (%s, %s)", (lane_id, booked)))
    assert states == {lane_id: "revoked", booked: "revoked"}, states
    audit = db_rows(db, "SELECT actor, action, target, reason FROM audit_events ORDER BY id")
    disable = [row for row in audit if row[1] == "principal.disable"]
    assert disable and str(lane_id) in disable[-1][3] and str(booked) in disable[-1][3], disable
    revoked = {row[2] for row in audit if row[1] == "lane.revoke" and row[0] == "root"}
    assert {f"lane:{lane_id}", f"lane:{booked}"} <= revoked, audit[-6:]
