"""SQLite WAL checkpoints in a background thread, not inside a request's COMMIT.

With SQLite's default (``wal_autocheckpoint=1000``) the commit that pushes the write-ahead log past
1,000 pages copies the log into the database and fsyncs it before it returns. A lane request +
release writes ~12 pages per commit (the lane row, its eight indexes, the audit row), so about
one commit in 80 paid a checkpoint: measured through the Flask app, commit p50 0.09 ms but p99
14.6 ms and max 52 ms on this machine's disk, and those ~1 % of commits were 85 % of all commit
time (issue 13, docs/benchmarks.md "Hot path").

Here every ``Database`` on a SQLite file checkpoints from its own thread, once a second when
something was written (``PRAGMA wal_checkpoint(PASSIVE)``: it never waits for, nor blocks,
readers or writers). Request commits keep a large automatic checkpoint only as a backstop
(``BACKSTOP_PAGES``), for a log the thread could not drain (a reader holding an old snapshot).

Durability (``synchronous=NORMAL`` in WAL mode, unchanged): a committed transaction survives a
crash of the process at once (the log is in the OS's page cache). On power loss or a kernel
crash, commits since the log was last fsynced can be lost, never half-applied. That fsync happens
at a checkpoint, so this thread bounds the window to about ``INTERVAL_S``; with the default
automatic checkpoint it was "the last <1,000 pages", which at a quiet hour could be hours of
commits. ``synchronous=FULL`` (an fsync per commit) would close the window at a few ms per commit.

The log file never shrank: a PASSIVE checkpoint copies frames back but leaves the file its size,
so one burst (or a reader holding an old snapshot through one) left a 38 MB ``-wal`` for good, and
a disk that filled stayed full after space came back. Two bounds now: every connection sets
``PRAGMA journal_size_limit`` (``JOURNAL_SIZE_LIMIT``: when a writer restarts the log after a
complete checkpoint, SQLite truncates the file to this), and a round that finds the file above it
runs ``wal_checkpoint(TRUNCATE)``, which empties it. TRUNCATE waits for readers on the old snapshot
and holds back writers meanwhile, so it runs with a short busy timeout (``TRUNCATE_WAIT_MS``): a
long reader makes it give up and try at the next round, never stall lane writes for the
connection's 60 s ``busy_timeout``. The size is checked every round, dirty or not (a stat), so a
log left large by writes that failed (a full disk) shrinks once space returns.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
BACKSTOP_PAGES = 20_000  # ~80 MB of log before a commit checkpoints inline
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024  # bytes of -wal file kept after a checkpoint (PRAGMA journal_size_limit)
TRUNCATE_WAIT_MS = 100  # how long a TRUNCATE checkpoint may wait for readers (and hold back writers)
BUSY_TIMEOUT_MS = 60_000  # the connections' own busy_timeout (db.py), restored after a TRUNCATE


class WalCheckpointer:
    """Started on the first write; ``written()`` marks work; stops with ``stop()`` or when the
    engine is garbage collected (tests build many short-lived databases)."""

    def __init__(self, engine: Engine, interval_s: float = INTERVAL_S, size_limit: int = JOURNAL_SIZE_LIMIT) -> None:
        self._engine_ref = weakref.ref(engine)
        self.interval_s = interval_s
        self.size_limit = size_limit
        self.wal_path = f"{engine.url.database}-wal"
        self.truncations = 0
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.rounds = 0

    def written(self) -> None:
        """A write transaction committed (or is about to): the next round checkpoints."""
        self._dirty.set()
        if self._thread is None:
            with self._start_lock:
                if self._thread is None and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
                    self._thread.start()

    def wal_size(self) -> int:
        try:
            return os.stat(self.wal_path).st_size
        except OSError:
            return 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            oversized = self.wal_size() > self.size_limit
            if not self._dirty.is_set() and not oversized:
                continue
            engine = self._engine_ref()
            if engine is None:
                return
            self._dirty.clear()
            try:
                self.checkpoint(engine, truncate=oversized)
            except Exception as exc:
                log.warning("WAL checkpoint failed: %s", str(exc).splitlines()[0])
            del engine

    def checkpoint(self, engine: Any, truncate: bool = False) -> None:
        """PASSIVE (never waits); with ``truncate``, then TRUNCATE with a short wait, which
        empties the log file when no reader holds an old snapshot."""
        # the raw connection is in autocommit (db.py sets isolation_level=None): no BEGIN around it
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
            cur.fetchall()
            if truncate:
                cur.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
                try:
                    cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    busy = cur.fetchone()[0]
                finally:
                    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                if not busy:
                    self.truncations += 1
            cur.close()
        finally:
            raw.close()
        self.rounds += 1

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
