"""API -> controller hand-off (``viplanes.cluster.handoff``) on SQLite, both sides in this process with
their own engines: the API's answer waits for the controller's commit; no master -> 503."""

from __future__ import annotations

import threading

from tests.support.world import make_world
from viplanes.cluster.leader import LeaderLease
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database


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


def test_done_payloads_parse_and_wake_only_their_waiters(sqlite_url) -> None:
    from viplanes.cluster.handoff import DoneListener, parse_done

    assert parse_done("12=active,13=failed,junk,=x,14=") == {12: "active", 13: "failed"}
    listener = DoneListener(Database(sqlite_url))
    mine, other = listener.expect(12), listener.expect(99)
    listener.deliver(parse_done("12=active,13=failed"))
    assert mine.event.is_set() and mine.state == "active"
    assert not other.event.is_set()
    listener.forget(12, mine)
    listener.forget(99, other)
    assert listener._waiting == {}


def test_long_done_payloads_are_cut_between_lanes() -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from viplanes.cluster.handoff import notify_done, parse_done

    sent: list[str] = []

    class PgSession(Session):  # records what would be NOTIFYed
        def execute(self, stmt, params=None, **_kw):  # type: ignore[override]
            sent.append(params["p"])

    engine = create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    # ids of every width and two states: cuts fall anywhere, not on a 7000-character boundary
    states = {lane_id: ("active" if lane_id % 3 else "failed") for lane_id in range(1, 3000)}
    notify_done(PgSession(bind=engine), states)
    assert len(sent) > 1 and all(len(p) < 8000 for p in sent)
    merged: dict[int, str] = {}
    for payload in sent:
        merged.update(parse_done(payload))
    assert merged == states


def test_done_payload_wakes_its_waiters_with_a_hint_only(sqlite_url) -> None:
    """The payload names lanes and a state; the waiter keeps the state as a hint (the API
    answers from the row it reads back, ``RemoteDataplane.activate``: anyone may NOTIFY)."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from viplanes.cluster.handoff import DoneListener, notify_done, parse_done

    sent: list[str] = []

    class PgSession(Session):  # records what would be NOTIFYed
        def execute(self, stmt, params=None, **_kw):  # type: ignore[override]
            sent.append(params["p"])

    engine = create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    notify_done(PgSession(bind=engine), {5: "active", 6: "failed"}, activated_at=1795419573.25)
    assert sent == ["5=active@1795419573.25,6=failed"]
    listener = DoneListener(Database(sqlite_url))
    active, failed = listener.expect(5), listener.expect(6)
    listener.deliver(parse_done(sent[0]))
    assert active.event.is_set() and active.state == "active"
    assert failed.event.is_set() and failed.state == "failed"


def test_pooled_connections_are_pinged_only_after_sitting_idle(tmp_path, monkeypatch) -> None:
    """A connection that broke in the pool is replaced at checkout once it sat idle past
    PING_IDLE_S (as pool_pre_ping did); one handed back just now is lent without a ping."""
    import pytest
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError

    from viplanes.store import db as dbmod

    engine = create_engine(f"sqlite:///{tmp_path / 'ping.db'}", pool_size=1, max_overflow=0)
    dbmod._ping_idle_connections(engine)

    def broken_in_pool() -> None:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            conn.exec_driver_sql("SELECT 1")
        raw.close()  # the server dropped it while it sat in the pool

    monkeypatch.setattr(dbmod, "PING_IDLE_S", 3600.0)  # "just handed back": no ping
    broken_in_pool()
    with pytest.raises(DBAPIError), engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    monkeypatch.setattr(dbmod, "PING_IDLE_S", 0.0)  # idle long enough: pinged, replaced
    broken_in_pool()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    engine.dispose()


class _NoPathPlane(MemoryDataplane):
    """The master's switches carry the lane but no usable path exists: held (issue 42)."""

    WHY = "no usable path to the edge: s2:3-s3:3 down (port s3:3 down)"

    def activate(self, lane, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
        from viplanes.domain.values import ActivationResult

        super().activate(lane, timeout_s)
        return ActivationResult(True, self.WHY, 0.001, held=True)


def test_api_answers_a_lane_held_by_the_controller_as_interrupted(sqlite_url, clock, topo) -> None:
    api_db = Database(sqlite_url)
    world = make_world(sqlite_url, clock, RemoteDataplane(api_db), topo)  # type: ignore[arg-type]
    ctl_db = Database(sqlite_url)
    controller = LaneManager(ctl_db, _NoPathPlane(), topo, clock)
    stop = threading.Event()

    def master_loop() -> None:
        while not stop.wait(0.02):
            controller.recover()

    try:
        assert LeaderLease(ctl_db, "ctl").try_acquire() == 1
        thread = threading.Thread(target=master_loop, daemon=True)
        thread.start()
        r = world.lane()
        assert r.status_code == 201, r.json
        assert (r.json["state"], r.json["reason"]) == ("interrupted", _NoPathPlane.WHY), r.json
    finally:
        stop.set()
        api_db.dispose()
        ctl_db.dispose()
        world.app.extensions["viplanes"].db.dispose()
