"""The controller lease when a real PostgreSQL server's clock steps back (issue 28, item 4).

A private PostgreSQL 15 cluster runs under libfaketime (tests/support/faketime.py), so its
``clock_timestamp()`` jumps when the test writes ``-3600`` to the offset file. A holder that dies
leaves ``expires_at`` an hour in the server's new future. Before: no standby took over for that
hour (here: not within 6 s). Now a standby that sees the row unchanged for a whole lease on its
own monotonic clock takes it; a live holder keeps it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import faketime
from tests.support.postgres import PG_BIN, PgCluster
from viplanes.cluster.leader import LeaderLease
from viplanes.store.db import Database

pytestmark = [
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.skipif(not faketime.available(), reason="libfaketime missing (Debian faketime; scripts/setup.sh)"),
]
LEASE_S, RENEW_S = 0.6, 0.1


class SteppedPg(PgCluster):
    """A throwaway cluster whose server processes read their wall clock through libfaketime."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: faketime.SteppedClockFile | None = None

    def _run(self, *args: str) -> None:
        env = self.clock.env() if self.clock is not None else None
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=60, cwd="/", env=env
        )

    def start_stepped(self) -> None:
        import shutil

        shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
        )
        self.clock = faketime.SteppedClockFile(Path(self.dir) / "faketime")
        self.clock.path.chmod(0o644)
        self.start_server()


@pytest.fixture
def stepped_pg() -> Iterator[tuple[SteppedPg, Database, Database]]:
    if not (PG_BIN / "pg_ctl").exists():
        pytest.skip("PostgreSQL 15 binaries not installed")
    cluster = SteppedPg()
    try:
        cluster.start_stepped()
        url = cluster.new_database()
        a, b = Database(url, pool_size=2), Database(url, pool_size=2)
        try:
            yield cluster, a, b
        finally:
            a.dispose()
            b.dispose()
    finally:
        cluster.clock = None
        cluster.stop()


def server_now(db: Database) -> float:
    from sqlalchemy import text

    with db.read_connection() as conn:
        return float(conn.execute(text("SELECT extract(epoch from clock_timestamp())")).scalar_one())


def test_a_dead_holder_is_replaced_though_the_server_clock_stepped_back(stepped_pg) -> None:
    cluster, a, b = stepped_pg
    assert cluster.clock is not None
    dead = LeaderLease(a, "ctl-dead", lease_s=LEASE_S, renew_s=RENEW_S)
    standby = LeaderLease(b, "ctl-standby", lease_s=LEASE_S, renew_s=RENEW_S)
    assert dead.try_acquire() == 1  # then it dies: no renewal, no release
    before = server_now(b)
    cluster.clock.step(-3600)
    assert server_now(b) < before - 3500, "the server's clock did not step"
    t0 = time.monotonic()
    took = None
    while time.monotonic() - t0 < 6.0:
        if standby.round():
            took = time.monotonic() - t0
            break
        time.sleep(RENEW_S)
    assert took is not None, "the standby waited on the server's stepped clock"
    print(f"\nstandby took the lease {took:.2f} s after the step (lease {LEASE_S} s, renew {RENEW_S} s)")
    assert took <= LEASE_S + 3 * RENEW_S + 0.5, took
    assert standby.current()[:2] == ("ctl-standby", 2)


def test_a_live_holder_keeps_the_lease_across_the_step(stepped_pg) -> None:
    cluster, a, b = stepped_pg
    assert cluster.clock is not None
    holder = LeaderLease(a, "ctl-live", lease_s=LEASE_S, renew_s=RENEW_S)
    standby = LeaderLease(b, "ctl-standby", lease_s=LEASE_S, renew_s=RENEW_S)
    assert holder.round()
    cluster.clock.step(-3600)
    t_end = time.monotonic() + 4 * LEASE_S
    while time.monotonic() < t_end:
        assert holder.round()
        assert not standby.round()
        time.sleep(RENEW_S)
    assert holder.current()[0] == "ctl-live"
