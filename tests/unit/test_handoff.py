"""API -> controller hand-off (``viplanes.handoff``) on SQLite, both sides in this process with
their own engines: the API's answer waits for the controller's commit; no master -> 503."""
from __future__ import annotations

import threading

from tests.unit.conftest import make_world
from viplanes.db import Database
from viplanes.handoff import RemoteDataplane
from viplanes.lanes import LaneManager
from viplanes.leader import LeaderLease
from viplanes.memplane import MemoryDataplane


def test_api_answers_when_the_controller_committed(sqlite_url, clock, topo) -> None:
    api_db = Database(sqlite_url)
    world = make_world(sqlite_url, clock, RemoteDataplane(api_db), topo)  # type: ignore[arg-type]
    ctl_db = Database(sqlite_url)
    switches = MemoryDataplane()
    controller = LaneManager(ctl_db, switches, topo, clock)
    stop = threading.Event()

    def master_loop() -> None:  # what ControllerNode does while master (SQLite: polling)
        while not stop.wait(0.02):
            controller.recover()

    try:
        assert world.lane().status_code == 503  # nobody holds the lease: no master right now
        assert LeaderLease(ctl_db, "ctl").try_acquire() == 1
        thread = threading.Thread(target=master_loop, daemon=True)
        thread.start()
        r = world.lane()
        assert r.status_code == 201 and r.json["state"] == "active", r.json
        assert list(switches.active) == [r.json["id"]]  # installed by the controller side
        switches.fail_next = "switch s1 refused: OFPET_BAD_MATCH"
        r2 = world.lane(dst_port=9001)
        assert r2.json["state"] == "failed" and "refused" in r2.json["reason"]
    finally:
        stop.set()
        api_db.dispose()
        ctl_db.dispose()
        world.app.extensions["viplanes"].db.dispose()
