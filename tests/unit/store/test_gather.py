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
