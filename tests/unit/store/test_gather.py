"""PostgreSQL's one-message read of a lane decision (``viplanes/store/lanesql/gather.py``) returns
what the separate reads return: the usable grants (a principal's own, and a group's only with
fresh evidence and a provider credential), the live lanes per grant in the window, the overlap
candidates and the lane-pool address, and a fresh id. Runs under ``-m postgres``."""

from __future__ import annotations

import ipaddress

import pytest

from tests.support.clock import T0
from tests.support.world import GRANT
from viplanes.domain.memberships import TokenGroups
from viplanes.lanes.overlap import overlap_key, overlap_query
from viplanes.lanes.pool import NAT_LOCK_KEY, POOL_SRC, LanePool
from viplanes.store import records as store
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.lanesql.core import live_counts, usable_grant_rules
from viplanes.store.lanesql.gather import gather
from viplanes.store.memberships import renew
from viplanes.store.models import Lane

SRC = "10.1.0.10"
NETS = [ipaddress.ip_network("203.0.113.10/32")]


def _world(db) -> tuple[int, int, int]:
    """rita with a grant of her own and one of her group (fresh evidence); two live lanes, one
    per grant, and an ended one that must not count."""
    with db.write() as s:
        p, _ = store.create_principal(s, "rita", "researcher", T0)
        own = store.create_grant(s, store.GrantInput(principal="rita", **GRANT), "root", T0).id
        group = store.create_grant(s, store.GrantInput(principal=None, group="hpc-users", **GRANT), "root", T0).id
        renew(s, TokenGroups(p.id, frozenset({"hpc-users"}), T0, T0 + 300), 30, T0, "rita")
        for grant, port, state in ((own, 9000, "active"), (group, 9001, "active"), (own, 9002, "released")):
            s.add(Lane(principal_id=p.id, grant_id=grant, src_ip=SRC, dst_ip="203.0.113.10", protocol="tcp",
                       dst_port=port, duration_s=600, purpose="x", state=state, created_at=T0, starts_at=T0,
                       expires_at=T0 + 600, nat_ip="198.51.100.193"))  # fmt: skip
        return p.id, own, group


@pytest.mark.parametrize("with_groups", [True, False])
def test_gather_reads_what_the_separate_reads_read(db, with_groups: bool) -> None:
    if db.is_sqlite:
        pytest.skip("PostgreSQL only: SQLite reads one statement at a time")
    pid, own, group = _world(db)
    now = T0 + 10
    query, params = overlap_query([SRC], "tcp", NETS, [(9001, 9001)], None, now, now + 600)
    lookup = LanePool(ipaddress.ip_network("198.51.100.192/27")).lookup_for_pg
    with db.write_connection() as conn:
        got = gather(conn, pid, now, with_groups, [overlap_key([SRC], "tcp"), NAT_LOCK_KEY], query, params,
                     lookup, {POOL_SRC: SRC})  # fmt: skip
    with db.write_connection() as conn:
        rules = usable_grant_rules(conn, pid, now, for_update=True, with_groups=with_groups)
        ids = [r.grant_id for r in rules]
        live = live_counts(conn, ids, now, now + 600)
        candidates = [list(r) for r in rawsql.rows(conn, query, params)]
        top = conn.exec_driver_sql("SELECT max(id) FROM lanes").scalar()
    assert ids == ([own, group] if with_groups else [own])
    assert got.rules == rules
    assert got.live == live == ({own: 1, group: 1} if with_groups else {own: 1})
    assert got.candidates == candidates and [c[2] for c in candidates] == [9001]
    assert got.address == "198.51.100.193"  # the host's address already in use
    assert got.next_id > top


def test_the_read_does_not_walk_ended_lanes(db) -> None:
    """With a history of ended lanes (3,000 of the same grant, source and destination) and the
    statistics autovacuum keeps, the read reaches the live lanes by index conditions on the state
    (``ix_lanes_grant_state``, ``ix_lanes_src_state``, ``ix_lanes_nat_state``): no plan node of it
    reads the history and throws it away, so a request costs the same after a year of lanes."""
    if db.is_sqlite:
        pytest.skip("PostgreSQL only: SQLite's planner has no statistics (its plans: lanes/overlap.py)")
    import re

    from viplanes.store.lanesql.gather import _read_text, _sequence

    pid, own, group = _world(db)
    with db.write_connection() as conn:
        columns = [
            c
            for (c,) in conn.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'lanes'"
                " AND column_name NOT IN ('id', 'dst_port', 'idempotency_key')"
            )
        ]
        names = ", ".join(columns)
        conn.exec_driver_sql(
            f"INSERT INTO lanes ({names}, dst_port) SELECT {names}, 10000 + g"
            " FROM lanes, generate_series(1, 3000) g WHERE state = 'released'"
        )
    with db.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE lanes")
        conn.commit()
    now = T0 + 10
    query, params = overlap_query([SRC], "tcp", NETS, [(9001, 9001)], None, now, now + 600)
    lookup = LanePool(ipaddress.ip_network("198.51.100.192/27")).lookup_for_pg
    sql, defaults = _read_text(query, lookup, True)
    with db.write_connection() as conn:
        values = {**defaults, **params, POOL_SRC: SRC, "principal_id": pid, "now": now, "lane_ids": _sequence(conn)}
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN (ANALYZE, COSTS OFF) " + sql, values))
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
    assert "Seq Scan on lanes" not in plan and max(removed, default=0) < 100, plan
