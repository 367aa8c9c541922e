"""The controller lease (``viplanes.cluster.leader``) on SQLite: one controller, or two on one file.

The same tests run on a real PostgreSQL in ``tests/integration/test_leader_pg.py``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database
from viplanes.store.migrations import upgrade


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


def reclaim_only_while_ours(db_a: Database, db_b: Database) -> None:
    """A switch refused the holder's generation: the holder takes epoch + 1 and hears it as a
    gain (on_change claims the switches again); a process that lost the lease takes nothing."""
    seen: list[tuple[bool, int]] = []
    a = LeaderLease(db_a, "ctl-a", lease_s=0.6, renew_s=0.1, on_change=lambda up, e: seen.append((up, e)))
    assert a.round() and seen == [(True, 1)]
    a.reclaim()
    assert a.round() and seen == [(True, 1), (True, 2)] and a.current()[:2] == ("ctl-a", 2)
    assert a.round() and seen == [(True, 1), (True, 2)]  # once per reclaim, not every round
    time.sleep(0.7)  # a stopped renewing: its lease expired
    b = LeaderLease(db_b, "ctl-b", lease_s=0.6, renew_s=0.1)
    assert b.try_acquire() == 3
    a.reclaim()
    a.round()
    assert a.current()[:2] == ("ctl-b", 3) and seen[-1] == (False, 3)


def test_reclaim_takes_a_new_epoch_only_while_the_lease_is_ours(lease_db) -> None:
    reclaim_only_while_ours(lease_db, lease_db)


def test_a_deposed_node_holding_the_lease_claims_the_switches_again(lease_db) -> None:
    """ControllerNode wiring: the plane's ``on_deposed`` makes the lease's next round take a new
    epoch, which reaches the plane as MASTER at that epoch (before: SLAVE for good)."""
    from types import SimpleNamespace

    from viplanes.cluster.node import ControllerNode

    roles: list[tuple[bool, int]] = []
    plane = SimpleNamespace(is_master=False, lanes={}, on_deposed=None)

    def set_role(master: bool, epoch: int) -> None:
        roles.append((master, epoch))
        plane.is_master = master

    plane.set_role = set_role
    node = ControllerNode(lease_db, plane, SimpleNamespace(committed_hook=None))
    node._leading = lambda master: None  # type: ignore[method-assign]  # no scheduler in this test
    assert node.lease.round() and roles == [(True, 1)]
    plane.is_master = False
    plane.on_deposed(1)  # a switch refused generation 1 (RoleController._step_down)
    assert node.lease.round() and roles == [(True, 1), (True, 2)] and plane.is_master
