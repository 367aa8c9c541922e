"""Can the database take a write now? ``/readyz`` asks, so a server whose every write fails (a
read-only file or mount, a full disk, a PostgreSQL hot standby or read-only transactions) is taken
out of rotation instead of answering 200 and then 503 to every lane request.

The probe writes one row of ``auth_failures`` in a transaction it rolls back, so nothing is ever
stored. SQLite also looks at the file system first (``statvfs``: mounted read-only, or less than
``MIN_FREE_BYTES`` free), because a rolled-back insert lives in the page cache and would pass on a
full disk where the next COMMIT fails. PostgreSQL also reads ``transaction_read_only`` and
``pg_is_in_recovery()``.

``/readyz`` is open to anyone: a probe per call would let a flood of them take SQLite's writer
lock over and over. The answer is cached for ``TTL_S`` and only one probe runs at a time (callers
meanwhile get the cached answer), so a flood costs one probe per ``TTL_S`` per process. The probe
waits at most ``WAIT_MS`` for locks: a busy database is a working one, and /readyz must answer fast.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from viplanes.store.db import Database
from viplanes.store.sqlite_wal import BUSY_TIMEOUT_MS

TTL_S = 2.0
MIN_FREE_BYTES = 16 * 1024 * 1024  # below this a SQLite commit is about to fail (WAL growth, checkpoints)
WAIT_MS = 500
OK = "ok"

_INSERT = "INSERT INTO auth_failures (scope, window_start, count) VALUES (:s, -1, 0)"


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0][:200]


def filesystem_refusal(
    path: str, statvfs: Callable[[str], Any] = os.statvfs, min_free: int = MIN_FREE_BYTES
) -> str | None:
    """Why the file system holding ``path`` cannot take writes, or None."""
    try:
        st = statvfs(os.path.dirname(os.path.abspath(path)) or ".")
    except OSError as exc:
        return f"cannot stat the database directory: {exc.strerror or exc}"
    if st.f_flag & os.ST_RDONLY:
        return "the database's file system is mounted read-only"
    free = st.f_bavail * st.f_frsize
    if free < min_free:
        return f"disk full: {free} bytes free for the database (below {min_free})"
    return None


class WriteProbe:
    """``check()``: "ok", or one line saying why writes are refused; cached for ``ttl_s``."""

    def __init__(
        self,
        db: Database,
        ttl_s: float = TTL_S,
        min_free_bytes: int = MIN_FREE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        statvfs: Callable[[str], Any] = os.statvfs,
    ) -> None:
        self.db = db
        self.ttl_s = ttl_s
        self.min_free_bytes = min_free_bytes
        self.clock = clock
        self.statvfs = statvfs
        self.probes = 0  # how many probes ran (tests: a flood costs one per TTL)
        self._lock = threading.Lock()
        self._answer = OK
        self._at: float | None = None

    def check(self) -> str:
        now = self.clock()
        if self._at is not None and now - self._at < self.ttl_s:
            return self._answer
        if not self._lock.acquire(blocking=self._at is None):
            return self._answer  # another request is probing: its previous answer stands
        try:
            if self._at is None or self.clock() - self._at >= self.ttl_s:
                self._answer = self._probe()
                self._at = self.clock()
                self.probes += 1
            return self._answer
        finally:
            self._lock.release()

    def _probe(self) -> str:
        try:
            if self.db.is_sqlite:
                return self._probe_sqlite()
            return self._probe_postgres()
        except Exception as exc:
            return f"database refuses writes: {_first_line(exc)}"

    def _probe_sqlite(self) -> str:
        path = self.db.engine.url.database
        if path and path != ":memory:":
            refusal = filesystem_refusal(path, self.statvfs, self.min_free_bytes)
            if refusal is not None:
                return refusal
        raw = self.db.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute(f"PRAGMA busy_timeout={WAIT_MS}")
            try:
                cur.execute("BEGIN IMMEDIATE")
            except Exception as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    return OK  # another writer holds the lock: writes are going through
                raise
            try:
                cur.execute(_INSERT.replace(":s", "?"), (f"readyz:{uuid.uuid4().hex}",))
            finally:
                cur.execute("ROLLBACK")
                cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cur.close()
        finally:
            raw.close()
        return OK

    def _probe_postgres(self) -> str:
        with self.db.engine.connect() as conn:
            tx = conn.begin()
            try:
                conn.execute(text(f"SET LOCAL lock_timeout = {WAIT_MS}"))
                conn.execute(text(f"SET LOCAL statement_timeout = {WAIT_MS * 4}"))
                standby, read_only = conn.execute(
                    text("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
                ).one()
                if standby:
                    return "database is a hot standby (in recovery): it refuses writes"
                if read_only == "on":
                    return "database transactions are read-only (default_transaction_read_only)"
                conn.execute(text(_INSERT), {"s": f"readyz:{uuid.uuid4().hex}"})
            finally:
                tx.rollback()
        return OK
