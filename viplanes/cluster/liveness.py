"""Is the lease's holder still connected to the database? A lock bound to its session says so.

A crashed master (``kill -9``, an out-of-memory kill, a failed assertion) never releases its lease;
alone, the lease makes a standby wait for its expiry, ``LEASE_S`` after the last renewal: most of
a fail-over (issue 44). But a process that dies closes its sockets, and PostgreSQL ends the
session at once and frees the session's locks. So each controller holds, on a connection of its
own and for its whole life, an advisory lock keyed by its holder name (``Liveness.hold``) and
says so in that name (``host:pid:rand:s``). A standby blocks on the holder's lock
(``Liveness.wait_gone``, woken by the server the moment the session ends) and then takes the
lease in a statement that first tries the same lock for its own transaction
(``pg_try_advisory_xact_lock``): it takes an unexpired lease only when the holder's session is
gone, never on timing. A live master cannot lose the lease this way however late its renewals
run under load; a machine that dies without closing its connections (power, a partition) is
still found by the lease's expiry, as before.

A holder whose name lacks the ``:s`` mark (an older version during an upgrade, SQLite) is never
taken early. Behind a pooler in transaction mode a session lock stays with the server connection
the pooler lent and is freed when the pooler closes it, live master or not: not supported
(docs/operating.md).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from viplanes.store.db import Database

log = logging.getLogger(__name__)

MARK = ":s"  # a holder name ending so holds its liveness lock for life
NAMESPACE = b"viplanes-lease-holder:"
WAIT_S = 1.0  # a standby's wait on one holder's lock, then it looks at the row again


def holder_key(holder: str) -> int:
    """The advisory lock key of a holder name: a signed 64-bit number, the same in every process."""
    digest = hashlib.blake2b(NAMESPACE + holder.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def marked(holder: str) -> bool:
    """Whether the holder holds its liveness lock (a standby may take its lease when it is free)."""
    return holder.endswith(MARK)


class Liveness:
    """This process's own lock (``hold``) and a standby's wait on the holder's (``wait_gone``),
    each on a raw PostgreSQL connection of its own, outside the pool."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._held: Any = None  # the connection that holds our lock
        self._waiting: Any = None  # the connection a standby waits on
        self._seen_held: str | None = None  # the holder whose lock this connection saw held

    def hold(self, holder: str) -> bool:
        """Take our own lock (nobody else knows the key: it never waits). False on any error."""
        try:
            conn = self._connect()
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_lock(%s)", (holder_key(holder),))
        except Exception as exc:
            log.warning("liveness lock not taken (%s): the lease is taken over at its expiry only", _first(exc))
            return False
        self._close_held()
        self._held = conn
        return True

    def holding(self) -> bool:
        """The connection holding our lock is still open (a poll reads an end-of-file at once)."""
        conn = self._held
        if conn is None or conn.closed:
            return False
        try:
            conn.poll()
        except Exception:
            self._close_held()
            return False
        return True

    def wait_gone(self, holder: str, timeout_s: float = WAIT_S) -> bool:
        """Block until ``holder``'s lock is free or ``timeout_s`` passed. True only when this
        connection saw the lock held and then free: the holder's session ended. A lock free at
        the first look proves nothing (a holder that never took it, a database fail-over that
        dropped every session and lock): the lease's expiry decides then. The lock is given back
        at once: the takeover tries it again inside its own transaction."""
        from psycopg2.errors import LockNotAvailable

        key = holder_key(holder)
        try:
            if self._waiting is None:
                self._waiting, self._seen_held = self._connect(), None
            with self._waiting.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                free = bool(cur.fetchone()[0])
                if not free:
                    self._seen_held = holder
                    cur.execute("SELECT set_config('lock_timeout', %s, false)", (str(max(1, int(timeout_s * 1000))),))
                    cur.execute("SELECT pg_advisory_lock(%s)", (key,))
                cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return self._seen_held == holder
        except Exception as exc:
            if not isinstance(exc, LockNotAvailable):  # a lock_timeout: the holder is still there
                log.warning("liveness wait on %s failed: %s", holder, _first(exc))
                self._close_waiting()
            return False

    def connected(self) -> bool:
        """A standby's waiting connection is open (else the database is away)."""
        return self._waiting is not None

    def _connect(self) -> Any:
        conn = self.db.raw_connection()
        conn.autocommit = True
        return conn

    def _close_held(self) -> None:
        _close(self._held)
        self._held = None

    def _close_waiting(self) -> None:
        _close(self._waiting)
        self._waiting = None

    def close(self) -> None:
        self._close_held()
        self._close_waiting()


class HolderWatch:
    """A standby's thread: wait on the current holder's lock; report it gone. ``watched()``
    names the holder to wait on (None while we lead, the row is unknown or the holder unmarked)."""

    def __init__(
        self, liveness: Liveness, me: str, watched: Callable[[], str | None], gone: Callable[[str], None]
    ) -> None:
        self.liveness, self.me, self.watched, self.gone = liveness, me, watched, gone
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="viplanes-lease-liveness", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.liveness.holding() and self.liveness.hold(self.me):
                log.warning("liveness lock taken again after its connection broke")
            holder = self.watched()
            if holder is None or holder == self.me or not marked(holder):
                self._stop.wait(0.2)
                continue
            began = time.monotonic()
            if self.liveness.wait_gone(holder) and not self._stop.is_set():
                self.gone(holder)
                self._stop.wait(0.05)  # the lease round reads the row again before the next wait
            elif time.monotonic() - began < 0.1:
                self._stop.wait(0.2)  # free at the first look, or the database away: no busy loop

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S + 1.0)
        self.liveness.close()


def _close(conn: Any) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
