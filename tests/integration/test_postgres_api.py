"""The API on PostgreSQL: the schemathesis run and the lane lifecycle, as on SQLite."""

from __future__ import annotations

import select
import time

import pytest

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def pg_world(pg_cluster, topo):
    w = make_world(pg_cluster.new_database(), FakeClock(), MemoryDataplane(), topo)
    yield w
    w.app.extensions["viplanes"].db.dispose()


def test_schemathesis_on_postgres(pg_world):
    from tests.support.schema import run_all_operations

    pg_world.lane()
    run_all_operations(pg_world)


def test_lane_lifecycle_on_postgres(pg_world):
    w = pg_world
    first = w.lane()
    assert first.status_code == 201 and first.json["state"] == "active" and first.json["nat_ip"]
    assert w.lane().json["error"] == "duplicate_lane"
    lane_id = first.json["id"]
    r = w.client.post(f"/api/v1/lanes/{lane_id}/extend", json={"add_s": 60}, headers=w.h("alice"))
    assert r.status_code == 200 and r.json["duration_s"] == 660
    assert w.client.get(f"/api/v1/lanes/{lane_id}", headers=w.h("bob")).status_code == 404
    r = w.client.post(f"/api/v1/grants/{w.grants['alice']}/revoke", headers=w.h("root"))
    assert r.json["revoked_lanes"] == [lane_id] and w.dataplane.active == {}
    audit = w.client.get("/api/v1/audit?action=grant.revoke", headers=w.h("root")).json
    assert audit and audit[0]["actor"] == "root"


def test_lane_pool_lookup_on_postgres(pg_world):
    """PostgreSQL runs the VALUES form of the pool lookup (SQLite the UNION ALL): same answers."""
    from tests.support.pool import distinct_hosts_lowest_free_address_and_sharing

    distinct_hosts_lowest_free_address_and_sharing(pg_world)


def test_idle_ping_leaves_no_transaction_open(pg_cluster, monkeypatch):
    """A pinged connection is lent outside any transaction: ``read_connection`` can switch it
    to autocommit (a ping in a transaction made psycopg2 refuse: "set_session cannot be used
    inside a transaction")."""
    from sqlalchemy import text

    from viplanes.store import db as dbmod

    monkeypatch.setattr(dbmod, "PING_IDLE_S", 0.0)  # every checkout pings
    db = dbmod.Database(pg_cluster.new_database())
    try:
        for n in (1, 2):
            with db.read_connection() as conn:
                assert conn.execute(text("SELECT :n"), {"n": n}).scalar() == n
        with db.write_connection() as conn:
            conn.execute(text("SELECT 3"))
        with db.read_connection() as conn:
            assert conn.execute(text("SELECT 4")).scalar() == 4
    finally:
        db.dispose()


def test_release_in_one_statement_keeps_every_answer(pg_world):
    """PostgreSQL ends a lane with one statement (viplanes/store/lanesql/postgres.py); the answers, the audit
    rows and the flow removal are those of the general path, and every refusal still refuses."""
    w = pg_world
    mine, other = w.lane().json["id"], w.lane(dst_port=9001).json["id"]
    assert w.client.post(f"/api/v1/lanes/{mine}/release", headers=w.h("bob")).status_code == 404
    assert w.client.post("/api/v1/lanes/999999/release", headers=w.h("alice")).status_code == 404
    r = w.client.post(f"/api/v1/lanes/{mine}/release", headers=w.h("alice"))
    assert r.status_code == 200 and r.json["state"] == "released" and r.json["reason"] == "released by alice"
    assert r.json["ended_at"] is not None and r.json["principal"] == "alice"
    assert mine not in w.dataplane.active and other in w.dataplane.active
    again = w.client.post(f"/api/v1/lanes/{mine}/release", headers=w.h("alice"))
    assert again.status_code == 409 and again.json["error"] == "lane_not_live"
    r = w.client.post(f"/api/v1/lanes/{other}/revoke", headers=w.h("root"))
    assert r.status_code == 200 and r.json["state"] == "revoked" and other not in w.dataplane.active
    assert r.json["principal"] == "alice" and r.json["reason"] == "revoked by root"  # the owner, not the caller
    audit = w.client.get("/api/v1/audit", headers=w.h("root")).json
    done = {(a["action"], a["target"]) for a in audit if a["decision"] == "done"}
    assert {("lane.release", f"lane:{mine}"), ("lane.revoke", f"lane:{other}")} <= done
    assert sum(a["action"] in ("lane.release", "lane.revoke") for a in audit) == 2  # refusals write none


def test_release_in_one_statement_wakes_the_controllers_at_commit(pg_world):
    """With the split's data plane the ended lane's NOTIFY rides in that statement; the flows
    are then the master's to remove (no local deactivate)."""
    import psycopg2

    from viplanes.cluster.handoff import CHANNEL

    w = pg_world
    lane_id = w.lane().json["id"]
    db = w.app.extensions["viplanes"].db
    listener = psycopg2.connect(db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
    listener.autocommit = True
    try:
        listener.cursor().execute(f"LISTEN {CHANNEL}")
        w.dataplane.capabilities = PlaneCapabilities(wake_channel=CHANNEL)  # as RemoteDataplane's
        assert w.client.post(f"/api/v1/lanes/{lane_id}/release", headers=w.h("alice")).status_code == 200
        # sent at commit, but it reaches the listener's socket a moment later: wait for it
        deadline = time.monotonic() + 5
        while not listener.notifies and time.monotonic() < deadline:
            select.select([listener], [], [], 0.1)
            listener.poll()
        assert [n.payload for n in listener.notifies] == [f"ended:{lane_id}"]
        assert lane_id in w.dataplane.active  # the master removes it, not this process
    finally:
        listener.close()


def test_repeated_statements_run_prepared_with_the_same_answers(pg_cluster):
    """psycopg2 + viplanes/store/lanesql/prepared.py: the second run of a text PREPAREs it, later runs EXECUTE
    it; rowcount and RETURNING are unchanged; a text PostgreSQL cannot prepare (``$1 IS NULL``)
    or would answer differently (``SELECT $1``: text) runs as before, and a failed PREPARE inside
    a transaction leaves that transaction usable."""
    from sqlalchemy import text

    from viplanes.store.db import Database

    db = Database(pg_cluster.new_database())
    try:
        with db.write_connection() as conn:
            conn.execute(text("CREATE TABLE prep_t (id serial PRIMARY KEY, a int, v float)"))
        for n in range(3):
            with db.write_connection() as conn:  # one pooled connection, reused
                new_id = conn.execute(
                    text("INSERT INTO prep_t (a, v) VALUES (:a, :v) RETURNING id"), {"a": n, "v": None}
                ).scalar()
                assert conn.execute(text("SELECT :x IS NULL"), {"x": None}).scalar() is True
                assert conn.execute(text("SELECT :n"), {"n": n}).scalar() == n
                assert (
                    conn.execute(text("UPDATE prep_t SET v = :v WHERE a <= :a"), {"a": n, "v": 1.5}).rowcount == n + 1
                )
                assert new_id == n + 1
        with db.read_connection() as conn:
            prepared = [s for (s,) in conn.execute(text("SELECT statement FROM pg_prepared_statements"))]
        assert any("INSERT INTO prep_t" in s for s in prepared) and any("UPDATE prep_t" in s for s in prepared)
        assert not any("IS NULL" in s for s in prepared)
    finally:
        db.dispose()


def test_a_prepared_statement_whose_columns_change_fails_once_then_runs_again(pg_cluster):
    """An online ``ADD COLUMN`` under a prepared ``RETURNING *``: PostgreSQL refuses the old plan
    ("cached plan must not change result type"). That one statement fails as a dropped connection
    (the API's 503, try again), the pool's stale plans go with their connections, and the next
    run is prepared afresh and sees the new column."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from viplanes.store.db import Database

    db = Database(pg_cluster.new_database())
    insert = text("INSERT INTO shape_t (a) VALUES (:a) RETURNING *")
    try:
        with db.write_connection() as conn:
            conn.execute(text("CREATE TABLE shape_t (id serial PRIMARY KEY, a int)"))
        for n in range(3):  # prepared from the second run on
            with db.write_connection() as conn:
                assert len(conn.execute(insert, {"a": n}).one()) == 2
        with db.write_connection() as conn:
            assert any("shape_t" in s for (s,) in conn.execute(text("SELECT statement FROM pg_prepared_statements")))
            conn.execute(text("ALTER TABLE shape_t ADD COLUMN b int DEFAULT 7"))
        with pytest.raises(DBAPIError) as refused, db.write_connection() as conn:
            conn.execute(insert, {"a": 10})
        assert refused.value.connection_invalidated and "cached plan" in str(refused.value)
        for n in range(3):
            with db.write_connection() as conn:
                assert tuple(conn.execute(insert, {"a": 20 + n}).one())[1:] == (20 + n, 7)
        with db.read_connection() as conn:
            assert conn.execute(text("SELECT count(*) FROM shape_t WHERE a = 10")).scalar() == 0
    finally:
        db.dispose()
