"""The lease deadline is kept by a thread that never waits on the database (issue 28, item 5):
a renewal that hangs (a partition that drops the connection's packets) must not keep the
holder master past its local deadline, and its late answer must not count."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database


@pytest.fixture
def lease_db(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'lease.db'}")
    db.create_all()
    yield db
    db.dispose()


def test_a_hung_renewal_steps_the_holder_down_at_its_deadline(lease_db) -> None:
    seen: list[tuple[bool, float]] = []
    lease = LeaderLease(
        lease_db, "a", lease_s=0.6, renew_s=0.1, on_change=lambda up, _e: seen.append((up, time.monotonic()))
    )
    hang, unhang = threading.Event(), threading.Event()
    real = lease.try_acquire

    def renewal() -> int | None:
        if hang.is_set():
            unhang.wait(5)  # the query never answers until the partition heals
        return real()

    lease.try_acquire = renewal  # type: ignore[method-assign]
    lease.start()
    try:
        t0 = time.monotonic()
        while not lease.is_leader and time.monotonic() - t0 < 3:
            time.sleep(0.01)
        assert lease.is_leader
        hang.set()
        time.sleep(0.2)  # the next renewal is hanging now; the last one that answered set this:
        deadline = lease._deadline
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.3)
        downs = [at for up, at in seen if not up]
        assert downs, "still master with its renewal hung past the deadline"
        assert deadline <= downs[0] <= deadline + 0.1, downs[0] - deadline
        assert not lease.is_leader
        unhang.set()  # the late renewal answers after its deadline: not counted ...
        hang.clear()
        t1 = time.monotonic()
        while not lease.is_leader and time.monotonic() - t1 < 3:
            time.sleep(0.01)
        assert lease.is_leader  # ... the next round takes the (still ours) lease again
        assert [up for up, _ in seen] == [True, False, True]
    finally:
        unhang.set()
        lease.stop()
