"""The API on PostgreSQL: the schemathesis run and the lane lifecycle, as on SQLite."""
from __future__ import annotations

import pytest

from tests.integration.conftest_pg import pg_cluster  # noqa: F401  (session fixture)
from tests.unit.conftest import FakeClock, make_world
from viplanes.memplane import MemoryDataplane

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def pg_world(pg_cluster, topo):  # noqa: F811
    w = make_world(pg_cluster.new_database(), FakeClock(), MemoryDataplane(), topo)
    yield w
    w.app.extensions["viplanes"].db.dispose()


@pytest.fixture(scope="session")
def topo():
    from tests.unit.conftest import CAMPUS
    from viplanes.topologies.loader import load_topology

    return load_topology(CAMPUS)


def test_schemathesis_on_postgres(pg_world):
    from tests.unit.test_api_schemathesis import run_all_operations

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
    from tests.unit.test_lane_pool import test_distinct_hosts_lowest_free_address_and_sharing

    test_distinct_hosts_lowest_free_address_and_sharing(pg_world)


def test_idle_ping_leaves_no_transaction_open(pg_cluster, monkeypatch):  # noqa: F811
    """A pinged connection is lent outside any transaction: ``read_connection`` can switch it
    to autocommit (a ping in a transaction made psycopg2 refuse: "set_session cannot be used
    inside a transaction")."""
    from sqlalchemy import text

    from viplanes import db as dbmod

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
