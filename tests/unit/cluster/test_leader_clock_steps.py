"""The lease when the database's clock steps back (issue 28, item 4).

A holder that dies leaves ``expires_at`` where its last renewal put it, on the database's clock.
If that clock then steps back an hour, ``expires_at < now`` stays false for an hour: before, no
standby took over for that hour and no lane started or ended. A step back of the database's clock
after a write is, to the lease, the same as the write having landed an hour later, so the tests
move ``expires_at`` an hour ahead (tests/integration/test_clock_steps_pg.py steps a real
PostgreSQL server's clock with libfaketime). Standbys now also count the holder's renewals on
their own monotonic clock; a live holder is never taken over."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import text

from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database

LEASE_S, RENEW_S = 0.6, 0.1


@pytest.fixture
def lease_db(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'lease.db'}")
    db.create_all()
    yield db
    db.dispose()


def step_database_clock_back(db: Database, seconds: float) -> None:
    with db.write() as s:
        s.execute(text("UPDATE controller_lease SET expires_at = expires_at + :s"), {"s": seconds})


def rounds_until_leader(lease: LeaderLease, within_s: float) -> float | None:
    """Seconds until ``lease`` leads, polling as its loop does; None if not within ``within_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if lease.round():
            return time.monotonic() - t0
        time.sleep(lease.renew_s)
    return None


def test_a_standby_takes_over_from_a_dead_holder_despite_a_clock_step_back(lease_db) -> None:
    dead = LeaderLease(lease_db, "ctl-dead", lease_s=LEASE_S, renew_s=RENEW_S)
    assert dead.try_acquire() == 1  # then it dies: no more renewals, no release
    standby = LeaderLease(lease_db, "ctl-standby", lease_s=LEASE_S, renew_s=RENEW_S)
    step_database_clock_back(lease_db, 3600)
    took = rounds_until_leader(standby, within_s=5.0)
    assert took is not None, "the standby waited on the database's stepped clock"
    assert took <= LEASE_S + 3 * RENEW_S + 0.3, took
    assert standby.epoch == 2


def test_a_live_holder_is_never_taken_over_by_the_standby_count(lease_db) -> None:
    holder = LeaderLease(lease_db, "ctl-live", lease_s=LEASE_S, renew_s=RENEW_S)
    standby = LeaderLease(lease_db, "ctl-standby", lease_s=LEASE_S, renew_s=RENEW_S)
    assert holder.round()
    step_database_clock_back(lease_db, 3600)
    t_end = time.monotonic() + 4 * LEASE_S
    while time.monotonic() < t_end:  # both loops, interleaved: the holder keeps renewing
        assert holder.round()
        assert not standby.round()
        time.sleep(RENEW_S)
    assert holder.current()[0] == "ctl-live"


def test_a_holder_stops_leading_at_its_own_deadline_whatever_the_database_says(lease_db) -> None:
    """The holder side was already safe: its deadline is local and monotonic."""
    holder = LeaderLease(lease_db, "ctl-a", lease_s=LEASE_S, renew_s=RENEW_S)
    assert holder.try_acquire() == 1
    step_database_clock_back(lease_db, 3600)  # the database would call it ours for an hour
    time.sleep(LEASE_S + 0.05)
    assert not holder.is_leader
