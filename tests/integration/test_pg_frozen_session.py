"""A process frozen inside a transaction (SIGSTOP, a paused VM) must not hold its locks for as
long as the freeze lasts: PostgreSQL ends the session after ``idle_in_transaction_session_timeout``
(viplanes/store/db.py). Shown with the advisory lock every lane request takes and a row lock."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from viplanes.store.db import IDLE_IN_TRANSACTION_S, Database

pytestmark = [pytest.mark.integration, pytest.mark.postgres]
GRANT_LOCK = 0x5650_0001


def test_every_connection_carries_the_backstop(pg_cluster) -> None:
    db = Database(pg_cluster.new_database(), pool_size=1)
    try:
        with db.read() as s:
            shown = s.execute(text("SHOW idle_in_transaction_session_timeout")).scalar()
        assert shown == f"{int(IDLE_IN_TRANSACTION_S)}s", shown
    finally:
        db.dispose()


def test_a_frozen_transaction_gives_its_locks_back(pg_cluster) -> None:
    url = pg_cluster.new_database()
    frozen_db, other = Database(url, pool_size=1, idle_in_transaction_s=0.5), Database(url, pool_size=1)
    with other.write() as s:
        s.execute(text("CREATE TABLE lanes_like (id int PRIMARY KEY, state text)"))
        s.execute(text("INSERT INTO lanes_like VALUES (1, 'installing')"))
    frozen, thaw = threading.Event(), threading.Event()
    outcome: list[object] = []

    def frozen_request() -> None:
        try:
            with frozen_db.write() as s:
                frozen_db.advisory_lock(s, GRANT_LOCK)
                s.execute(text("UPDATE lanes_like SET state = 'active' WHERE id = 1"))
                frozen.set()
                thaw.wait(8)  # frozen between its statements and its COMMIT
            outcome.append("committed")
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=frozen_request)
    worker.start()
    try:
        assert frozen.wait(5)
        t0 = time.monotonic()
        with other.write() as s:  # another request: same grant lock, same row
            other.advisory_lock(s, GRANT_LOCK)
            s.execute(text("UPDATE lanes_like SET state = 'released' WHERE id = 1"))
        waited = time.monotonic() - t0
        print(f"\nanother request got the locks {waited:.2f} s after the holder froze")
        assert waited < 2.0, waited
    finally:
        thaw.set()
        worker.join(10)
    assert outcome and isinstance(outcome[0], Exception), outcome  # its work was rolled back
    with other.read() as s:
        assert s.execute(text("SELECT state FROM lanes_like WHERE id = 1")).scalar() == "released"
    with frozen_db.read() as s:  # the pool replaced the ended connection
        assert s.execute(text("SELECT count(*) FROM lanes_like")).scalar() == 1
    frozen_db.dispose()
    other.dispose()
