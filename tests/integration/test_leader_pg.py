"""The controller lease on a real PostgreSQL: two contenders (two engines, as two processes
have), expiry on the database's clock, a new epoch only while the lease is ours (``reclaim``),
and two renewal loops racing for it."""
from __future__ import annotations

import threading
import time

import pytest

from tests.integration.conftest_pg import pg_cluster  # noqa: F401  (session fixture)
from tests.unit.test_leader import contenders_take_turns, reclaim_only_while_ours
from viplanes.db import Database
from viplanes.leader import LeaderLease

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def two_engines(pg_cluster):  # noqa: F811
    url = pg_cluster.new_database()
    a, b = Database(url, pool_size=2), Database(url, pool_size=2)
    yield a, b
    a.dispose()
    b.dispose()


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
