"""The controller lease on a real PostgreSQL: two contenders (two engines, as two processes
have), expiry on the database's clock, a new epoch only while the lease is ours (``reclaim``),
and two renewal loops racing for it."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event

from tests.support.leases import contenders_take_turns, reclaim_only_while_ours
from viplanes.cluster.leader import LeaderLease

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_two_contenders_and_expiry_on_postgres(two_engines) -> None:
    contenders_take_turns(*two_engines)


def test_reclaim_on_postgres(two_engines) -> None:
    reclaim_only_while_ours(*two_engines)


def test_racing_loops_never_both_lead(two_engines) -> None:
    """Two renewal loops: exactly one leads at any sample; stopping it hands over within a lease."""
    loops = [LeaderLease(db, f"ctl-{i}", lease_s=0.6, renew_s=0.1) for i, db in enumerate(two_engines)]
    for loop in loops:
        loop.start()
    try:
        both = 0
        for _ in range(100):
            time.sleep(0.01)
            both += all(loop.is_leader for loop in loops)
        assert both == 0
        leader = next(loop for loop in loops if loop.is_leader)
        other = next(loop for loop in loops if loop is not leader)
        t0 = time.monotonic()
        leader._stop.set()  # a crash: no release, the lease must expire on the database clock
        leader._thread.join(2)  # type: ignore[union-attr]
        taken = threading.Event()
        while time.monotonic() - t0 < 3 and not taken.is_set():
            if other.is_leader:
                taken.set()
            time.sleep(0.02)
        assert taken.is_set() and other.epoch == leader.epoch + 1
        assert 0.3 < time.monotonic() - t0 < 1.5
    finally:
        for loop in loops:
            loop.stop()


def test_a_holder_frozen_inside_its_renewal_does_not_block_the_standby(two_engines) -> None:
    """SIGSTOP can land between the renewal's UPDATE and its COMMIT: the row stays locked. The
    standby must still take the lease about one lease after the last renewal that committed,
    not when the frozen holder wakes up (it waited 14 s in a CI run before the guard)."""
    a_db, b_db = two_engines
    lease_s = 0.6
    a, b = (LeaderLease(db, name, lease_s=lease_s, renew_s=0.1) for db, name in ((a_db, "a"), (b_db, "b")))
    assert a.try_acquire() == 1
    frozen, thaw = threading.Event(), threading.Event()

    @event.listens_for(a_db.engine, "commit")
    def _freeze(_conn) -> None:  # type: ignore[no-untyped-def]
        if not frozen.is_set():
            frozen.set()
            thaw.wait(8)  # the renewal's UPDATE ran; its COMMIT waits for the thaw

    outcome: list[object] = []
    renewal = threading.Thread(target=lambda: outcome.append(_attempt(a.try_acquire)))
    renewal.start()
    try:
        assert frozen.wait(2)
        t0 = time.monotonic()
        epoch = None
        while epoch is None and time.monotonic() - t0 < 4:
            epoch = _attempt(b.try_acquire)
            epoch = epoch if isinstance(epoch, int) else None
            time.sleep(0.05)
        took = time.monotonic() - t0
        assert epoch == 2, f"the standby never took the lease while the holder was frozen ({took:.1f} s)"
        print(f"\nstandby leads {took:.2f} s after the holder froze inside its renewal")
        assert took < lease_s + 1.0, took
    finally:
        thaw.set()
        renewal.join(10)
    # the frozen renewal never committed: the server ended its session, so it failed, not renewed
    assert outcome and isinstance(outcome[0], Exception), outcome
    assert b.current()[0] == "b"
    assert a.try_acquire() is None  # the thawed holder is a standby now, its pool recovered


def _attempt(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception as exc:
        return exc
