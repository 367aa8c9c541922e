"""Leader-lease checks run on SQLite (unit/cluster/test_leader.py) and on PostgreSQL
(integration/test_leader_pg.py): the same behaviour on both databases."""

from __future__ import annotations

import time

from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database


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
