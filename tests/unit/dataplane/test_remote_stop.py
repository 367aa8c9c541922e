"""``RemoteDataplane.stop`` ends its listener: the split deployment's API plane keeps one thread
retrying LISTEN on ``viplanes_done`` while its database is away, and before, ``stop`` did nothing,
so a plane built by a test outlived its PostgreSQL and printed "LISTEN viplanes_done failed:
... Connection refused" after the session's summary (CI run 47). No server is needed: an address
where nothing listens is the database that went away."""

from __future__ import annotations

import threading

from tests.support.procs import free_port, wait_for
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.store.db import Database


def _listeners() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "viplanes-done-listener" and t.is_alive()]


def test_stop_ends_the_listener_that_retries_a_gone_database() -> None:
    before = len(_listeners())
    db = Database(f"postgresql://postgres@127.0.0.1:{free_port()}/gone")
    plane = RemoteDataplane(db)
    try:
        assert len(_listeners()) == before + 1, "the plane listens from its construction"
        assert not plane.listener.ready.is_set()  # nothing there: it keeps retrying
    finally:
        plane.stop()
        db.dispose()
    assert wait_for(lambda: len(_listeners()) == before, 5), "the listener outlived stop()"
