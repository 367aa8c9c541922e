"""The hot path of issue 13 keeps its budget: a lane request is one write transaction for the
decision (plus one for the activation result), with a fixed number of statements, and SQLite WAL
checkpoints happen in a background thread instead of inside a request's COMMIT."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event

from viplanes.store.db import Database
from viplanes.store.sqlite_wal import BACKSTOP_PAGES


def _trace(db: Database) -> tuple[list[str], Any]:
    seen: list[str] = []

    def grab(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        words = " ".join(statement.split()).upper()
        seen.append(words if words.startswith("BEGIN") else words.split(" ", 1)[0])

    event.listen(db.engine, "before_cursor_execute", grab)
    return seen, lambda: event.remove(db.engine, "before_cursor_execute", grab)


def test_request_and_release_stay_within_their_statement_budget(world):
    db = world.app.extensions["viplanes"].db
    first = world.lane("alice", dst_port=9001)  # warm: the token lookup is cached from here on
    assert first.status_code == 201
    assert world.client.post(f"/api/v1/lanes/{first.json['id']}/release", headers=world.h("alice")).status_code == 200
    seen, stop = _trace(db)
    try:
        r = world.lane("alice")
        assert r.status_code == 201 and r.json["state"] == "active"
        request = list(seen)
        seen.clear()
        assert world.client.post(f"/api/v1/lanes/{r.json['id']}/release", headers=world.h("alice")).status_code == 200
        release = list(seen)
    finally:
        stop()
    # decide + insert + audit, then the activation result after the barriers: two write
    # transactions; grants, quota count, one overlap query (two index seeks), one lane-pool
    # lookup (10.1.0.10 is NAT'd: its address or the lowest free one), lane, audit; activation
    # UPDATE, audit (before issue 13 the overlap check and the pool lookup were two each)
    assert request.count("BEGIN IMMEDIATE") == 2, request  # SQLite's writer lock taken up front
    body = [k for k in request if k != "BEGIN IMMEDIATE"]
    assert body == ["SELECT"] * 4 + ["INSERT", "INSERT", "UPDATE", "INSERT"], request
    # one transaction: the lane (with its owner's name), the UPDATE, the audit row
    assert release.count("BEGIN IMMEDIATE") == 1, release
    assert [k for k in release if k != "BEGIN IMMEDIATE"] == ["SELECT", "UPDATE", "INSERT"], release


def test_audit_rows_still_name_every_decision(world):
    r = world.lane("alice")
    world.client.post(f"/api/v1/lanes/{r.json['id']}/release", headers=world.h("alice"))
    denied = world.lane("alice", dst_ip="198.51.100.1")  # outside the grant
    assert denied.status_code == 403
    events = world.client.get("/api/v1/audit?limit=10", headers=world.h("root")).json
    actions = [(e["action"], e["decision"], e["target"]) for e in reversed(events)]
    lane = f"lane:{r.json['id']}"
    assert ("lane.request", "allow", lane) in actions and ("lane.activate", "done", lane) in actions
    assert ("lane.release", "done", lane) in actions and ("lane.request", "deny", "") in actions


def test_commits_do_not_checkpoint_the_wal_inline(sqlite_url):
    db = Database(sqlite_url)
    db.create_all()
    try:
        with db.engine.connect() as conn:  # every connection of the pool gets the backstop
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == BACKSTOP_PAGES
    finally:
        db.dispose()


def test_the_background_thread_checkpoints_after_writes_and_stops_with_dispose(sqlite_url):
    db = Database(sqlite_url)
    db.create_all()
    checkpointer = db._checkpointer
    assert checkpointer is not None
    checkpointer.interval_s = 0.02
    from viplanes.store import records as store

    with db.write() as s:
        store.audit(s, 1.0, "test", "test.write", "", "done")
    deadline = time.monotonic() + 5
    while checkpointer.rounds == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checkpointer.rounds >= 1
    rounds = checkpointer.rounds
    time.sleep(0.1)
    assert checkpointer.rounds == rounds  # nothing written since: no checkpoint
    thread = checkpointer._thread
    db.dispose()
    assert thread is not None and not thread.is_alive()


def test_sqlite_write_transactions_share_one_kept_connection_and_survive_failures(sqlite_url):
    """No pool checkout per write transaction on SQLite (they are serial anyway): the same
    connection, BEGIN IMMEDIATE each time; a failed transaction rolls back and the next one works;
    an invalidated connection is replaced; dispose closes it."""
    from sqlalchemy import text

    db = Database(sqlite_url)
    db.create_all()
    try:
        with db.write_connection() as first:
            first.execute(text("CREATE TABLE t (x INTEGER)"))
        with db.write_connection() as second:
            assert second is first
            second.execute(text("INSERT INTO t VALUES (1)"))
        try:
            with db.write_connection() as third:
                third.execute(text("INSERT INTO t VALUES (2)"))
                raise RuntimeError("the request failed")
        except RuntimeError:
            pass
        with db.read_connection() as reader:
            assert [r[0] for r in reader.execute(text("SELECT x FROM t"))] == [1]  # 2 rolled back
        first.invalidate()
        with db.write_connection() as fresh:
            assert fresh is not first
            fresh.execute(text("INSERT INTO t VALUES (3)"))
        with db.read_connection() as reader:
            assert [r[0] for r in reader.execute(text("SELECT x FROM t ORDER BY x"))] == [1, 3]
    finally:
        db.dispose()
    assert db._kept_writer is None and fresh.closed
