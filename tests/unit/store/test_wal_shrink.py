"""Issue 28 item 9: SQLite's write-ahead log shrinks after a burst instead of keeping its peak size.

The burst is written while a reader holds an old snapshot (as a long console page or an export
does), so no checkpoint can reset the log and it grows past ``JOURNAL_SIZE_LIMIT``; once the
reader ends, the checkpointer must give the space back. Before: PASSIVE checkpoints only, and the
``-wal`` file stayed at its peak for as long as the process ran."""

from __future__ import annotations

import os
import sqlite3
import time

from viplanes.store import sqlite_wal
from viplanes.store.db import Database
from viplanes.store.models import AuditEvent

BIG = "x" * 16_000  # four pages per row: a burst of 700 rows is ~11 MB of log


def _burst(d: Database, rows: int = 700) -> None:
    for i in range(rows):
        with d.write() as s:
            s.add(AuditEvent(at=float(i), actor="burst", action="test", target="", decision="done", reason=BIG))


def _wal(d: Database) -> int:
    path = f"{d.engine.url.database}-wal"
    return os.stat(path).st_size if os.path.exists(path) else 0


def _reader(d: Database) -> sqlite3.Connection:
    """A connection of another client holding a read snapshot open."""
    conn = sqlite3.connect(str(d.engine.url.database), isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM audit_events").fetchone()
    return conn


def test_every_connection_limits_the_journal(sdb: Database) -> None:
    with sdb.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_size_limit").scalar() == sqlite_wal.JOURNAL_SIZE_LIMIT


def test_wal_shrinks_after_a_burst(sdb: Database) -> None:
    reader = _reader(sdb)
    _burst(sdb)
    peak = _wal(sdb)
    assert peak > sqlite_wal.JOURNAL_SIZE_LIMIT, peak  # the reader kept the log from resetting
    reader.rollback()
    reader.close()
    deadline = time.monotonic() + 6 * sqlite_wal.INTERVAL_S
    while _wal(sdb) > sqlite_wal.JOURNAL_SIZE_LIMIT and time.monotonic() < deadline:
        time.sleep(0.1)
    after = _wal(sdb)
    print(f"wal peak {peak / 1e6:.1f} MB, {after / 1e6:.2f} MB after the reader ended")
    assert after <= sqlite_wal.JOURNAL_SIZE_LIMIT, (peak, after)
    with sdb.read() as s:  # and nothing was lost on the way
        assert s.query(AuditEvent).filter(AuditEvent.actor == "burst").count() == 700


def test_a_long_reader_does_not_stall_writers_behind_truncate(sdb: Database) -> None:
    """The abuse: a reader that never lets go (a slow page, a stuck export) while the log is over
    the limit. TRUNCATE must give up after its short wait each round, not hold writers for the
    connection's 60 s busy timeout."""
    reader = _reader(sdb)
    try:
        _burst(sdb)
        assert _wal(sdb) > sqlite_wal.JOURNAL_SIZE_LIMIT
        worst = 0.0
        stop = time.monotonic() + 4 * sqlite_wal.INTERVAL_S  # several checkpoint rounds
        while time.monotonic() < stop:
            t0 = time.monotonic()
            with sdb.write() as s:
                s.add(AuditEvent(at=0.0, actor="w", action="test", target="", decision="done", reason=""))
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.01)
        print(f"worst write while TRUNCATE was refused: {worst * 1000:.0f} ms")
        assert worst < 1.0, worst
    finally:
        reader.rollback()
        reader.close()


def test_truncation_is_retried_without_new_writes(sdb: Database) -> None:
    """A log left large by writes (or by failed ones, on a full disk) shrinks with no further
    write to mark the database dirty: the size is checked every round."""
    reader = _reader(sdb)
    _burst(sdb)
    time.sleep(3 * sqlite_wal.INTERVAL_S)  # rounds pass while the reader holds: nothing shrinks
    assert _wal(sdb) > sqlite_wal.JOURNAL_SIZE_LIMIT
    reader.rollback()
    reader.close()
    deadline = time.monotonic() + 4 * sqlite_wal.INTERVAL_S
    while _wal(sdb) > sqlite_wal.JOURNAL_SIZE_LIMIT and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _wal(sdb) <= sqlite_wal.JOURNAL_SIZE_LIMIT
