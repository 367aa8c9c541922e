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
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
BACKSTOP_PAGES = 20_000  # ~80 MB of log before a commit checkpoints inline


class WalCheckpointer:
    """Started on the first write; ``written()`` marks work; stops with ``stop()`` or when the
    engine is garbage collected (tests build many short-lived databases)."""

    def __init__(self, engine: Engine, interval_s: float = INTERVAL_S) -> None:
        self._engine_ref = weakref.ref(engine)
        self.interval_s = interval_s
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

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._dirty.is_set():
                continue
            engine = self._engine_ref()
            if engine is None:
                return
            self._dirty.clear()
            try:
                self.checkpoint(engine)
            except Exception as exc:
                log.warning("WAL checkpoint failed: %s", str(exc).splitlines()[0])
            del engine

    def checkpoint(self, engine: Any) -> None:
        # the raw connection is in autocommit (db.py sets isolation_level=None): no BEGIN around it
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
            cur.fetchall()
            cur.close()
        finally:
            raw.close()
        self.rounds += 1

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
