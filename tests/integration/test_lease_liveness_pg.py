"""A crashed master's lease is taken as soon as its database session ends, never a live one's
(``viplanes.cluster.liveness``, issue 44), on a real PostgreSQL: two engines, as two processes."""

from __future__ import annotations

import time

import pytest

from viplanes.cluster.leader import LeaderLease

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _until(check, within_s: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if check():
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def _crash_renewals(lease: LeaderLease) -> None:
    """The holder stops renewing and never gives the lease back (its liveness lock stays)."""
    lease._stop.set()
    lease._kick.set()
    assert lease._thread is not None
    lease._thread.join(2)


def test_a_crashed_holders_lease_is_taken_when_its_session_ends_not_at_its_expiry(two_engines) -> None:
    db_a, db_b = two_engines
    a = LeaderLease(db_a, "ctl-a", lease_s=30.0, renew_s=0.2, liveness=True)
    b = LeaderLease(db_b, "ctl-b", lease_s=30.0, renew_s=0.2, liveness=True)
    assert a.holder == "ctl-a:s" and b.holder == "ctl-b:s"  # both hold their liveness lock
    a.start()
    try:
        assert _until(lambda: a.is_leader, 5.0) is not None
        b.start()
        assert _until(lambda: b._watched() == "ctl-a:s", 5.0) is not None
        time.sleep(0.3)  # b waits on a's lock
        assert not b.is_leader
        _crash_renewals(a)
        assert a._holder_watch is not None
        a._holder_watch.stop()  # the process died: its connections closed (no re-take)
        took = _until(lambda: b.is_leader, 5.0)
        assert took is not None and took < 1.0, f"b took over after {took} s of a 30 s lease"
        assert b.current()[:2] == ("ctl-b:s", 2)
        print(f"\ntaken {took * 1000:.0f} ms after the holder's session ended (lease 30 s)")
    finally:
        b.stop()
        a.stop(release=False)


def test_a_live_holder_that_stops_renewing_keeps_its_lease_until_the_expiry(two_engines) -> None:
    """Late renewals (a loaded machine, a long pause) never count as death: the session is open."""
    db_a, db_b = two_engines
    a = LeaderLease(db_a, "ctl-a", lease_s=1.5, renew_s=0.2, liveness=True)
    b = LeaderLease(db_b, "ctl-b", lease_s=1.5, renew_s=0.2, liveness=True)
    a.start()
    try:
        assert _until(lambda: a.is_leader, 5.0) is not None
        b.start()
        assert _until(lambda: b._watched() == "ctl-a:s", 5.0) is not None
        _crash_renewals(a)  # stopped renewing, but alive: its liveness lock is held
        t0 = time.monotonic()
        assert _until(lambda: b.is_leader, 5.0) is not None
        took = time.monotonic() - t0
        assert took > 1.0, f"b took a live holder's lease after {took:.2f} s of a 1.5 s lease"
    finally:
        b.stop()
        a.stop(release=False)


def test_a_holder_without_a_liveness_lock_is_taken_at_its_expiry_only(two_engines) -> None:
    """An older controller during an upgrade holds no liveness lock: its free key proves nothing."""
    db_a, db_b = two_engines
    a = LeaderLease(db_a, "ctl-a", lease_s=1.5, renew_s=0.2)
    b = LeaderLease(db_b, "ctl-b", lease_s=1.5, renew_s=0.2, liveness=True)
    assert a.holder == "ctl-a"
    a.start()
    try:
        assert _until(lambda: a.is_leader, 5.0) is not None
        b.start()
        time.sleep(0.3)
        _crash_renewals(a)
        t0 = time.monotonic()
        assert _until(lambda: b.is_leader, 5.0) is not None
        assert time.monotonic() - t0 > 1.0
    finally:
        b.stop()
        a.stop(release=False)


def test_only_a_lock_seen_held_and_then_freed_says_the_holder_is_gone(two_engines) -> None:
    """A lock free at the first look proves nothing (a holder that never took it, a database
    fail-over that dropped every lock); held, then freed by its session's end, proves a death."""
    from viplanes.cluster.liveness import Liveness

    db_a, db_b = two_engines
    holder, standby = Liveness(db_a), Liveness(db_b)
    try:
        assert not standby.wait_gone("ctl-a:s", timeout_s=0.2)  # never held: unknown
        assert holder.hold("ctl-a:s") and holder.holding()
        t0 = time.monotonic()
        assert not standby.wait_gone("ctl-a:s", timeout_s=0.3)  # held: waits, then still there
        assert time.monotonic() - t0 >= 0.25
        holder.close()  # the session ends
        assert standby.wait_gone("ctl-a:s", timeout_s=2.0)
    finally:
        holder.close()
        standby.close()
