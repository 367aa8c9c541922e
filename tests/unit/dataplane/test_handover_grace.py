"""A graceful hand-over is no outage for the API (issue 28, item 9): a lease given back a moment
ago still counts as a master for ``HANDOVER_GRACE_S`` (a standby takes it within a renewal and
recovers the lanes left installing); past the grace, no controller means 503 as before. The
real run (SIGTERM of the master under load) is tests/integration/test_graceful_handover.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from viplanes.cluster.leader import LeaderLease
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.store.db import Database

NO_MASTER = ["controller (no master right now)"]


def test_a_released_lease_is_a_hand_over_for_the_grace_only(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'grace.db'}")
    db.create_all()
    try:
        plane = RemoteDataplane(db)
        assert plane.unready(None) == NO_MASTER  # type: ignore[arg-type]  # never held: nobody
        lease = LeaderLease(db, "old-master")
        assert lease.try_acquire() == 1
        lease.release()  # SIGTERM of the master: the standby has not taken it yet
        plane._alive_until = 0.0
        assert plane.unready(None) == []  # type: ignore[arg-type]  # accepted; the new master installs it
        with db.write() as s:  # the grace ran out and nobody took the lease
            s.execute(
                text("UPDATE controller_lease SET expires_at = expires_at - :g"), {"g": 2.6}
            )  # HANDOVER_GRACE_S is 2.5
        plane._alive_until = 0.0
        assert plane.unready(None) == NO_MASTER  # type: ignore[arg-type]
    finally:
        db.dispose()
