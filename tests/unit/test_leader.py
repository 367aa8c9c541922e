"""The controller lease (``viplanes.leader``) on SQLite: one controller, or two on one file.

The same tests run on a real PostgreSQL in ``tests/integration/test_leader_pg.py``."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from viplanes.db import Database
from viplanes.leader import LeaderLease
from viplanes.migrations import upgrade


@pytest.fixture
def lease_db(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'lease.db'}")
    upgrade(db.engine)
    yield db
    db.dispose()


def contenders_take_turns(db_a: Database, db_b: Database) -> None:
    """Shared by the SQLite and PostgreSQL tests: one holder at a time, epoch up on every change."""
    a = LeaderLease(db_a, "ctl-a", lease_s=0.6, renew_s=0.2)
    b = LeaderLease(db_b, "ctl-b", lease_s=0.6, renew_s=0.2)
    first = a.try_acquire()
    assert first is not None
    assert b.try_acquire() is None  # held and not expired
    assert a.try_acquire() == first  # a renewal keeps the epoch
    time.sleep(0.8)  # a stops renewing (SIGSTOP, crash): its lease expires on the database clock
    taken = b.try_acquire()
    assert taken == first + 1
    assert a.try_acquire() is None  # the deposed holder cannot renew
    holder, epoch, left = b.current()
    assert (holder, epoch) == ("ctl-b", taken) and 0 < left <= 0.6
    b.release()  # clean shutdown: the other takes over without waiting for expiry
    assert a.try_acquire() == first + 2


def test_two_contenders_and_expiry_on_sqlite(lease_db) -> None:
    contenders_take_turns(lease_db, lease_db)


def test_loop_reports_gain_and_loss(lease_db) -> None:
    seen: list[tuple[bool, int]] = []
    a = LeaderLease(lease_db, "ctl-a", lease_s=0.6, renew_s=0.1, on_change=lambda up, e: seen.append((up, e)))
    a.start()
    try:
        deadline = time.monotonic() + 3
        while not a.is_leader and time.monotonic() < deadline:
            time.sleep(0.02)
        assert a.is_leader and seen == [(True, 1)]
        time.sleep(0.7)  # several renewals: still leader, no new change
        assert a.is_leader and seen == [(True, 1)]
    finally:
        a.stop()
    assert seen == [(True, 1), (False, 1)] and not a.is_leader
    b = LeaderLease(lease_db, "ctl-b", lease_s=0.6, renew_s=0.1)
    assert b.try_acquire() == 2  # released at stop: no wait for expiry


def test_renew_must_be_shorter_than_lease(lease_db) -> None:
    with pytest.raises(ValueError):
        LeaderLease(lease_db, "x", lease_s=1.0, renew_s=1.0)
