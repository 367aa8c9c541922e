"""The lane manager on a real database: SQLite here, PostgreSQL under -m postgres.

Every test takes ``db_url``, which is parametrised over both databases (see conftest).
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event, select

from tests.support.clock import T0
from tests.support.concurrency import run_together
from tests.support.store import campus_topology, lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.errors import Conflict, VipError
from viplanes.lanes.manager import LaneManager, can_move
from viplanes.store import records as store
from viplanes.store.db import Database
from viplanes.store.models import Lane


def test_lane_lifecycle_and_transitions(db):
    callers = principals(db, ("alice", "researcher"))
    dp = MemoryDataplane()
    clock = [T0]
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    lane, created = mgr.request(callers["alice"], lane_input())
    assert created and lane.state == "active" and lane.nat_ip == "198.51.100.193"
    later, _ = mgr.request(callers["alice"], lane_input(port=9001, start_at=T0 + 30))
    assert later.state == "scheduled" and later.nat_ip is None  # an address only once it starts
    clock[0] += 30
    assert mgr.tick() == {"started": 1, "expired": 0}
    assert dp.active[later.id].nat_ip == "198.51.100.193"  # same host, same address
    clock[0] += 600
    assert mgr.tick() == {"started": 0, "expired": 2}
    assert dp.active == {}
    assert can_move("active", "expired") and not can_move("expired", "active") and not can_move("failed", "active")


def test_accepted_lanes_survive_a_restart(db_url):
    db = Database(db_url)
    db.create_all()
    callers = principals(db, ("alice", "researcher"))
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    ids = {mgr.request(callers["alice"], lane_input(port=p))[0].id for p in (9000, 9001, 9002)}
    db.dispose()  # the API process ends
    db2 = Database(db_url)
    dp2 = MemoryDataplane()
    mgr2 = LaneManager(db2, dp2, campus_topology(), clock=lambda: T0 + 1)
    dp2.attach_source(mgr2.desired_lanes)
    dp2.reconcile()
    assert set(dp2.active) == ids
    db2.dispose()


def test_installing_lanes_are_recovered(db):
    callers = principals(db, ("alice", "researcher"))
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    lane, _ = mgr.request(callers["alice"], lane_input())
    with db.write() as s:  # as if the process died between decision and activation
        s.get(Lane, lane.id).state = "installing"
    dp = MemoryDataplane()
    assert LaneManager(db, dp, campus_topology(), clock=lambda: T0).recover() == 1
    assert lane.id in dp.active


def _storm(db, callers, n, max_lanes):
    """``n`` threads request lanes at once; returns (created lanes, refusal codes, seconds)."""
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    names = list(callers)
    barrier = threading.Barrier(n)
    created, refused, errors = [], [], []
    lock = threading.Lock()

    def one(i):
        who = names[i % len(names)]
        src = "10.1.0.10" if who == "alice" else "10.1.0.20"
        barrier.wait()
        try:
            lane, _ = mgr.request(callers[who], lane_input(src=src, port=9000 + i // len(names)))
            with lock:
                created.append(lane)
        except VipError as exc:
            with lock:
                refused.append(exc.code)
        except Exception as exc:  # anything else is a bug
            with lock:
                errors.append(repr(exc))

    elapsed = run_together(one, n)
    assert not errors, errors[:3]
    return created, refused, elapsed


def test_200_simultaneous_requests_against_quota_5(db, record_property):
    callers = principals(db, ("alice", "researcher"), max_lanes=5, ports=["9000-9300"])
    created, refused, elapsed = _storm(db, callers, 200, 5)
    record_property("seconds", round(elapsed, 3))
    print(f"\n200 concurrent requests, quota 5, {db.engine.dialect.name}: {elapsed:.2f}s")
    assert len(created) == 5 and all(ln.state == "active" for ln in created)
    assert len(refused) == 195 and set(refused) == {"quota_exceeded"}
    with db.read() as s:
        assert len(s.scalars(select(Lane)).all()) == 5


def test_two_principals_race_for_lane_pool_addresses(db):
    callers = principals(db, ("alice", "researcher"), ("bob", "researcher"), max_lanes=5, ports=["9000-9300"])
    created, refused, _ = _storm(db, callers, 100, 5)
    assert len(created) == 10 and set(refused) == {"quota_exceeded"}
    by_host: dict[str, set[str]] = {}
    for ln in created:
        by_host.setdefault(ln.src_ip, set()).add(ln.nat_ip)
    # one address per host, shared by its lanes; two hosts never share one
    assert {h: len(a) for h, a in by_host.items()} == {"10.1.0.10": 1, "10.1.0.20": 1}
    assert by_host["10.1.0.10"].isdisjoint(by_host["10.1.0.20"])


def test_extend_release_and_revoke_grant(db):
    callers = principals(db, ("alice", "researcher"), ("root", "operator"))
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: T0)
    a, _ = mgr.request(callers["alice"], lane_input(port=9000))
    b, _ = mgr.request(callers["alice"], lane_input(port=9001))
    assert mgr.extend(callers["alice"], a.id, 600).expires_at == T0 + 1200
    with pytest.raises(VipError) as exc:
        mgr.extend(callers["alice"], a.id, 3600)
    assert exc.value.code == "duration_too_long"
    assert mgr.end(callers["alice"], a.id, "released").state == "released"
    with pytest.raises(Conflict):
        mgr.end(callers["root"], a.id, "revoked")
    with db.write() as s:
        ended = store.revoke_grant(s, b.grant_id, T0)
    mgr.revoke_lanes(ended)
    assert ended == [b.id] and dp.active == {}
    with pytest.raises(VipError) as exc:
        mgr.request(callers["alice"], lane_input(port=9002))
    assert exc.value.code == "no_grant"


def test_concurrent_release_ends_a_lane_once(db):
    callers = principals(db, ("alice", "researcher"))
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    lane, _ = mgr.request(callers["alice"], lane_input())
    barrier = threading.Barrier(8)
    outcomes = []

    def release():
        barrier.wait()
        try:
            mgr.end(callers["alice"], lane.id, "released")
            outcomes.append("ok")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=release) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]


def test_scheduler_thread_ticks_and_recovers_after_grace(db):
    from viplanes.lanes.scheduler import Scheduler

    callers = principals(db, ("alice", "researcher"))
    clock = [T0]
    dp = MemoryDataplane()
    mgr = LaneManager(db, dp, campus_topology(), clock=lambda: clock[0])
    stuck, _ = mgr.request(callers["alice"], lane_input(port=9000))
    short, _ = mgr.request(callers["alice"], lane_input(port=9001, duration_s=5))
    with db.write() as s:
        s.get(Lane, stuck.id).state = "installing"
    dp.active.clear()
    clock[0] += 10  # the short lane is due to expire
    sched = Scheduler(mgr, interval_s=0.02, recover_every_s=0.2)
    sched.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and stuck.id not in dp.active:
            time.sleep(0.02)
    finally:
        sched.stop()
    with db.read() as s:
        assert s.get(Lane, short.id).state == "expired"
        assert s.get(Lane, stuck.id).state == "active"


def test_simultaneous_retries_with_one_idempotency_key_make_one_lane(db):
    callers = principals(db, ("alice", "researcher"), max_lanes=5)
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0)
    barrier = threading.Barrier(20)
    answers = []

    def retry():
        barrier.wait()
        lane, created = mgr.request(callers["alice"], lane_input(), idempotency_key="transfer-7")
        answers.append((lane.id, created))

    threads = [threading.Thread(target=retry) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 20 and len({lane_id for lane_id, _ in answers}) == 1
    assert sum(created for _, created in answers) == 1


def test_a_decision_is_counted_once_it_is_committed(db):
    """``on_decision`` (the /metrics decision counter) hears a request's decision only after its
    transaction committed: a lost COMMIT (here: the engine's commit refused once) is no decision."""
    callers = principals(db, ("alice", "researcher"), max_lanes=5)
    counted: list[str] = []
    mgr = LaneManager(db, MemoryDataplane(), campus_topology(), clock=lambda: T0, on_decision=counted.append)
    refuse = [True]

    def lose(commits: bool) -> None:
        if commits and refuse[0]:
            refuse[0] = False
            raise RuntimeError("the commit was lost")

    # SQLite commits through the DBAPI; PostgreSQL's COMMIT is a statement (``pgbegin``)
    hook, listener = (
        ("commit", lambda _conn: lose(True))
        if db.is_sqlite
        else ("before_cursor_execute", lambda _c, _cur, sql, *_: lose("COMMIT" in sql))
    )
    event.listen(db.engine, hook, listener)
    try:
        with pytest.raises(RuntimeError, match="commit was lost"):
            mgr.request(callers["alice"], lane_input())
    finally:
        event.remove(db.engine, hook, listener)
    with db.read() as s:
        assert s.scalars(select(Lane)).all() == []
    assert counted == []
    lane, created = mgr.request(callers["alice"], lane_input())
    assert created and lane.state == "active" and counted == ["allowed"]
