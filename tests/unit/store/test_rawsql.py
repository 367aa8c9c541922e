"""The hot path's statements on SQLite's cursor (viplanes/store/lanesql/sqlite.py) give what Core gives: the
same rows (JSON columns decoded the same way), the same rows written, the same row counts and
the same SQLAlchemy exceptions; Core is used again as soon as anyone listens to the statements."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError

from tests.support.clock import T0
from tests.support.store import campus_topology, lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.manager import LaneManager
from viplanes.lanes.overlap import _overlap_query
from viplanes.lanes.pool import LanePool
from viplanes.store.db import Database
from viplanes.store.lanesql import core as lane_sql
from viplanes.store.lanesql import sqlite as rawsql


@pytest.fixture
def sql_world(sqlite_url):
    db = Database(sqlite_url)
    db.create_all()
    topo = campus_topology()
    mgr = LaneManager(db, MemoryDataplane(), topo, clock=lambda: T0)
    alice = principals(db, ("alice", "researcher"), max_lanes=50, ports=("1-65535",))["alice"]
    ids = [mgr.request(alice, lane_input(port=port))[0].id for port in (9000, 9001, 9002)]
    mgr.request(alice, lane_input(dst_ip=None, dst_prefix="203.0.113.64/28", port=443))
    mgr.end(alice, ids[1], "released")
    yield db, mgr, alice, ids
    db.dispose()


def _both(db: Database, run: Any, core: Any) -> tuple[Any, Any]:
    """(raw answer, Core answer) of one statement in one read transaction; the raw one must
    really have been raw."""
    with db.engine.connect() as conn, conn.begin():
        before = rawsql.stats["raw"]
        raw = run(conn)
        assert rawsql.stats["raw"] == before + 1, "took the Core path"
        return raw, core(conn)


def test_selects_give_the_rows_core_gives(sql_world):
    db, mgr, alice, ids = sql_world
    grants_params = {"principal_id": alice.id, "now": T0}
    raw, core = _both(
        db,
        lambda c: rawsql.rows(c, lane_sql._USABLE_GRANTS, grants_params),
        lambda c: [tuple(r) for r in c.execute(lane_sql._USABLE_GRANTS, grants_params)],
    )
    assert raw == core and isinstance(raw[0][1], list)  # JSON columns decoded
    for lane_id in ids:
        params = {"lane_id_": lane_id}
        raw, core = _both(
            db,
            lambda c, params=params: rawsql.first_mapping(c, lane_sql._LANE_WITH_OWNER, params),
            lambda c, params=params: dict(c.execute(lane_sql._LANE_WITH_OWNER, params).mappings().one()),
        )
        assert raw == core and raw["owner_name"] == "alice"
    for single in (True, False):
        params = {"src": "10.1.0.10", "src2": "10.1.0.10", "proto": "tcp", "start": T0, "end": T0 + 60}
        if single:
            params.update(dst="203.0.113.10", dport=9000)
        query = _overlap_query(single, False, False)
        raw, core = _both(
            db,
            lambda c, query=query, params=params: rawsql.rows(c, query, params),
            lambda c, query=query, params=params: [tuple(r) for r in c.execute(query, params)],
        )
        assert raw == core and raw
    pool = LanePool(ipaddress.ip_network("100.64.0.0/27"))
    for src in ("10.1.0.10", "10.1.0.99"):
        raw, core = _both(
            db,
            lambda c, src=src: rawsql.scalar(c, pool._lookup, {"src": src}),
            lambda c, src=src: c.scalar(pool._lookup, {"src": src}),
        )
        assert raw == core


def test_live_counts_by_one_bind_per_grant_match_the_expanding_list(sql_world):
    db, mgr, alice, ids = sql_world
    with db.engine.connect() as conn, conn.begin():
        for grant_ids in ([1], [1, 2, 3], list(range(1, 12))):  # the last: more than _FIXED_IN_MAX
            for exclude in (None, ids[0]):
                params: dict[str, Any] = {"grant_ids": grant_ids, "start": T0, "end": T0 + 60}
                stmt = lane_sql._LIVE_COUNTS
                if exclude is not None:
                    params["exclude"], stmt = exclude, lane_sql._LIVE_COUNTS_EXCLUDING
                expected = dict(tuple(r) for r in conn.execute(stmt, params))
                assert lane_sql.live_counts(conn, grant_ids, T0, T0 + 60, exclude) == expected
                assert expected.get(1) == (3 if exclude is None else 2)


def test_writes_store_what_core_stores(sql_world):
    """The same INSERT, UPDATE and audit row through both paths: the stored rows are equal."""
    db, mgr, alice, ids = sql_world
    with db.engine.connect() as conn, conn.begin():
        row = lane_sql.lane_row_for_change(conn, ids[0], lock=False)
        assert row is not None
        values = {k: v for k, v in row.items() if k not in ("id", "owner_name")}
        values["state"] = "installing"
        for variant in ({}, {"dst_nets": ["203.0.113.0/24"], "dst_ports": [[1, 9]], "dst_ip": None}):
            raw_id = rawsql.write(conn, lane_sql._INSERT_LANE, {**values, **variant})[1]
            core_id = conn.execute(lane_sql._INSERT_LANE, {**values, **variant}).inserted_primary_key[0]
            stored = [
                dict(conn.execute(select(lane_sql.LANES).where(lane_sql.LANES.c.id == i)).mappings().one())
                for i in (raw_id, core_id)
            ]
            assert stored[0].pop("id") == raw_id and stored[1].pop("id") == core_id
            assert stored[0] == stored[1]
        update = {"state": "active", "activated_at": T0, "activation_ms": 1.5}
        assert lane_sql.record_activation(conn, raw_id, update) is True
        assert lane_sql.record_activation(conn, raw_id, update) is False  # no longer installing
        assert conn.execute(lane_sql._RECORD_ACTIVATION, {**update, "lane_id_": core_id}).rowcount == 1
        read = [
            dict(conn.execute(select(lane_sql.LANES).where(lane_sql.LANES.c.id == i)).mappings().one())
            for i in (raw_id, core_id)
        ]
        assert {k: v for k, v in read[0].items() if k != "id"} == {k: v for k, v in read[1].items() if k != "id"}
        lane_sql.add_audit(conn, T0, "alice", "lane.test", "lane:1", "done", "x" * 3000)
        audit = conn.execute(select(lane_sql.AUDIT).order_by(lane_sql.AUDIT.c.id.desc())).mappings().first()
        assert audit["action"] == "lane.test" and len(audit["reason"]) == 2000


def test_a_driver_error_is_the_sqlalchemy_exception_core_raises(sql_world):
    db, mgr, alice, ids = sql_world
    with db.engine.connect() as conn, conn.begin(), pytest.raises(IntegrityError):  # NOT NULL actor
        rawsql.write(
            conn,
            lane_sql._INSERT_AUDIT,
            {"at": T0, "actor": None, "action": "a", "target": "t", "decision": "d", "reason": ""},
        )


def test_anyone_listening_to_statements_gets_core_and_sees_them(sql_world):
    db, mgr, alice, ids = sql_world
    seen: list[str] = []

    def grab(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement.split()[0])

    event.listen(db.engine, "before_cursor_execute", grab)
    try:
        before = dict(rawsql.stats)
        lane, _ = mgr.request(alice, lane_input(port=9050))
        mgr.end(alice, lane.id, "released")
    finally:
        event.remove(db.engine, "before_cursor_execute", grab)
    assert rawsql.stats["raw"] == before["raw"] and rawsql.stats["core"] > before["core"]
    assert seen.count("INSERT") == 4 and seen.count("UPDATE") == 2  # lane + 3 audit rows
    before = dict(rawsql.stats)
    lane, _ = mgr.request(alice, lane_input(port=9051))  # nobody listens: raw again
    mgr.end(alice, lane.id, "released")
    assert rawsql.stats["raw"] > before["raw"] and rawsql.stats["core"] == before["core"]
