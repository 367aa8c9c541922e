"""Upgrades from every earlier schema revision: a database made by each migration, holding rows
that revision's schema allows, upgraded to head, then used (a lane requested and released through
the lane service). SQLite always; PostgreSQL in the integration run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, text

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.store.backup import known_revisions
from viplanes.store.db import Database
from viplanes.store.migrations import current, upgrade
from viplanes.topologies.model import Topology

REVISIONS = sorted(known_revisions())
HEAD = REVISIONS[-1]


def seed(conn: Connection) -> dict[str, Any]:
    """One of everything the schema at this revision holds; what must survive the upgrade."""
    tables = set(inspect(conn).get_table_names())
    conn.execute(
        text("INSERT INTO principals (name, role, disabled, created_at) VALUES ('old', 'researcher', false, 1)")
    )
    pid = conn.execute(text("SELECT id FROM principals WHERE name = 'old'")).scalar_one()
    conn.execute(
        text("INSERT INTO api_tokens (principal_id, token_hash, created_at) VALUES (:p, :h, 1)"),
        {"p": pid, "h": "ab" * 32},
    )
    conn.execute(
        text(
            "INSERT INTO grants (principal_id, src_prefixes, dst_prefixes, protocols, ports, max_duration_s, "
            "max_lanes, created_at, created_by) VALUES (:p, '[\"10.1.0.0/24\"]', '[\"203.0.113.0/24\"]', "
            "'[\"tcp\"]', '[9000]', 60, 1, 1, 'root')"
        ),
        {"p": pid},
    )
    gid = conn.execute(text("SELECT id FROM grants WHERE principal_id = :p"), {"p": pid}).scalar_one()
    conn.execute(
        text(
            "INSERT INTO lanes (principal_id, grant_id, src_ip, dst_ip, protocol, dst_port, duration_s, purpose, "
            "state, reason, created_at, starts_at, expires_at) VALUES (:p, :g, '10.1.0.10', '203.0.113.10', "
            "'tcp', 9000, 60, 'from an old release', 'released', 'released', 1, 1, 61)"
        ),
        {"p": pid, "g": gid},
    )
    conn.execute(
        text(
            "INSERT INTO audit_events (at, actor, action, target, decision, reason) "
            "VALUES (1, 'old', 'lane.request', 'lane', 'allow', 'old audit')"
        )
    )
    if "controller_lease" in tables:
        conn.execute(
            text("INSERT INTO controller_lease (name, holder, epoch, expires_at) VALUES ('master', 'old-node', 7, 1)")
        )
    return {"principal": pid, "grant": gid}


@pytest.fixture
def empty_url(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'old.db'}"
    return str(request.getfixturevalue("pg_cluster").empty_database())


def test_every_revision_is_covered() -> None:
    assert REVISIONS[0] == "0001" and len(REVISIONS) >= 7


@pytest.mark.parametrize("revision", REVISIONS[:-1])
def test_upgrade_from(revision: str, empty_url: str, topo: Topology) -> None:
    d = Database(empty_url)
    upgrade(d.engine, revision)
    assert current(d.engine) == revision
    with d.engine.begin() as conn:
        ids = seed(conn)
    upgrade(d.engine)
    assert current(d.engine) == HEAD
    d.dispose()

    w = make_world(empty_url, FakeClock(), MemoryDataplane(), topo)  # the app, as serve starts it
    try:
        lane = w.lane()
        assert lane.status_code in (200, 201), lane.get_json()
        body = lane.get_json()
        assert body["state"] == "active"
        released = w.client.post(f"/api/v1/lanes/{body['id']}/release", headers=w.h("alice"))
        assert released.status_code == 200 and released.get_json()["state"] == "released"
        db: Database = w.app.extensions["viplanes"].db
        with db.engine.connect() as conn:
            old = conn.execute(
                text("SELECT purpose, state, grant_id, dst_ip FROM lanes WHERE principal_id = :p"),
                {"p": ids["principal"]},
            ).one()
            assert tuple(old) == ("from an old release", "released", ids["grant"], "203.0.113.10")
            assert conn.execute(text("SELECT count(*) FROM audit_events WHERE reason = 'old audit'")).scalar_one() == 1
            assert conn.execute(
                text("SELECT token_hash FROM api_tokens WHERE principal_id = :p"), {"p": ids["principal"]}
            ).scalar_one()
    finally:
        w.app.extensions["viplanes"].db.dispose()
