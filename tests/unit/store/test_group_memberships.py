"""Group grants and membership evidence in the store, on SQLite and (``-m postgres``) PostgreSQL:
the grants query a lane request locks, the renewal, the sweep's query."""

from __future__ import annotations

from tests.support.clock import T0
from tests.support.world import GRANT
from viplanes.domain.memberships import TokenGroups
from viplanes.store import records as store
from viplanes.store.lanesql.core import usable_grant_rules
from viplanes.store.memberships import any_lapsed, end_lapsed, fresh_groups, renew
from viplanes.store.models import Lane


def setup(db) -> tuple[int, int]:
    with db.write() as s:
        p, _ = store.create_principal(s, "rita", "researcher", T0)
        g = store.create_grant(s, store.GrantInput(principal=None, group="/hpc-users", **GRANT), "root", T0)
        return p.id, g.id


def rules(db, pid: int, now: float) -> list[int]:
    with db.write_connection() as conn:
        return [r.grant_id for r in usable_grant_rules(conn, pid, now, for_update=not db.is_sqlite, with_groups=True)]


def add_lane(db, pid: int, gid: int) -> int:
    with db.write() as s:
        lane = Lane(principal_id=pid, grant_id=gid, src_ip="10.1.0.10", dst_ip="203.0.113.10", protocol="tcp",
                    dst_port=9000, duration_s=600, purpose="x", state="active", created_at=T0, starts_at=T0,
                    expires_at=T0 + 600)  # fmt: skip
        s.add(lane)
        s.flush()
        return lane.id


def test_a_group_grant_holds_only_with_fresh_evidence(db) -> None:
    pid, gid = setup(db)
    with db.read() as s:
        assert store.get_grant(s, gid).group_name == "hpc-users"  # a top-level path is the name
    assert rules(db, pid, T0) == []
    with db.write() as s:
        assert renew(s, TokenGroups(pid, frozenset({"hpc-users"}), T0, T0 + 300), 30, T0, "rita") == []
        assert fresh_groups(s, pid, T0) == ["hpc-users"]
    assert rules(db, pid, T0 + 329) == [gid]
    assert rules(db, pid, T0 + 331) == []


def test_renewal_without_the_group_and_the_sweep_end_lanes(db) -> None:
    pid, gid = setup(db)
    with db.write() as s:
        renew(s, TokenGroups(pid, frozenset({"hpc-users"}), T0, T0 + 300), 30, T0, "rita")
    first = add_lane(db, pid, gid)
    with db.write() as s:
        assert renew(s, TokenGroups(pid, frozenset(), T0 + 10, T0 + 310), 30, T0 + 10, "rita") == [first]
    with db.write() as s:
        renew(s, TokenGroups(pid, frozenset({"hpc-users"}), T0 + 20, T0 + 320), 30, T0 + 20, "rita")
    second = add_lane(db, pid, gid)
    with db.read() as s:
        assert not any_lapsed(s, T0 + 349)
        assert any_lapsed(s, T0 + 351)
    with db.write() as s:
        assert end_lapsed(s, T0 + 351) == [second]
        assert end_lapsed(s, T0 + 352) == []
