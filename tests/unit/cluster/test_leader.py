"""The controller lease (``viplanes.cluster.leader``) on SQLite: one controller, or two on one file.

The same tests run on a real PostgreSQL in ``tests/integration/test_leader_pg.py``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.leases import contenders_take_turns, reclaim_only_while_ours
from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database


@pytest.fixture
def lease_db(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'lease.db'}")
    db.create_all()
    yield db
    db.dispose()


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


def test_reclaim_takes_a_new_epoch_only_while_the_lease_is_ours(lease_db) -> None:
    reclaim_only_while_ours(lease_db, lease_db)


def test_a_deposed_node_holding_the_lease_claims_the_switches_again(lease_db) -> None:
    """ControllerNode wiring: the plane's ``on_deposed`` makes the lease's next round take a new
    epoch, which reaches the plane as MASTER at that epoch (before: SLAVE for good)."""
    from types import SimpleNamespace

    from viplanes.cluster.node import ControllerNode

    roles: list[tuple[bool, int]] = []
    plane = SimpleNamespace(is_master=False, lanes={}, on_deposed=None, gate_writes=lambda gate: None)

    def set_role(master: bool, epoch: int) -> None:
        roles.append((master, epoch))
        plane.is_master = master

    plane.set_role = set_role
    node = ControllerNode(lease_db, plane, SimpleNamespace(announce_outcomes=lambda hooks: None), roles=plane)
    node._leading = lambda master: None  # type: ignore[method-assign]  # no scheduler in this test
    assert node.lease.round() and roles == [(True, 1)]
    plane.is_master = False
    plane.on_deposed(1)  # a switch refused generation 1 (RoleController._step_down)
    assert node.lease.round() and roles == [(True, 1), (True, 2)] and plane.is_master


def test_a_standby_sleeps_until_the_expiry_when_it_comes_before_its_period() -> None:
    from viplanes.cluster.leader import EXPIRY_MARGIN_S, standby_wait

    assert standby_wait(1.2, 0.3) == 0.3  # a live holder's lease: the period
    assert standby_wait(0.1, 0.3) == pytest.approx(0.1 + EXPIRY_MARGIN_S)  # just past the expiry
    assert standby_wait(-0.5, 0.3) == pytest.approx(EXPIRY_MARGIN_S)  # expired already: at once


def test_a_standby_takes_a_dead_holders_lease_at_its_expiry_not_a_period_later(lease_db) -> None:
    """Issue 44: the standby polled blind every ``renew_s``, so it took the lease up to a whole
    period after the expiry (lease 0.6 s, period 0.4 s: at 0.8 s). It aims at the expiry now."""
    dead = LeaderLease(lease_db, "ctl-dead", lease_s=0.6, renew_s=0.4)
    assert dead.try_acquire() == 1
    renewed = time.monotonic()  # its last renewal: the holder dies here (never renews again)
    standby = LeaderLease(lease_db, "ctl-standby", lease_s=0.6, renew_s=0.4)
    standby.start()
    try:
        deadline = time.monotonic() + 3
        while not standby.is_leader and time.monotonic() < deadline:
            time.sleep(0.005)
        took = time.monotonic() - renewed
    finally:
        standby.stop()
    assert standby.epoch == 2 and 0.6 <= took < 0.75, took
