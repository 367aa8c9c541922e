"""API -> controller hand-off through the shared database (issue 12, split deployment).

The API process commits the lane ``installing`` (the lane manager does that before it calls the
data plane) and ``RemoteDataplane.activate`` (``viplanes.dataplane.remote``) then wakes the
controller and waits until the row leaves ``installing``: the master controller's lane manager activates it (``recover``), confirms
with barriers and commits ``active`` or ``failed``. So the answer still means "installed on every
switch". If either side dies in between, the row stays ``installing`` and whichever controller is
master picks it up in its next recovery round; nothing lives only in a process.

Wake-up both ways: PostgreSQL ``NOTIFY viplanes_lanes`` wakes the controllers (``Waker``); the
master's lane manager NOTIFYs ``viplanes_done`` with ``id=state,...`` inside the very transaction
that records the outcomes (``notify_done``, delivered at commit), and each API process has ONE
listening connection (``DoneListener``) whose thread wakes the request threads waiting for those
lanes. A lane not heard of within ``recheck_s`` (a lost notification, a listener reconnecting)
is read from its row, and without PostgreSQL (or while the listener is down) the API polls the
row as before (10 ms, backing off to 50 ms); the controller then polls too (``Waker.wait``
returns on its timeout).

A wake-up carries no authority (issue 28): PostgreSQL checks no privilege for NOTIFY, so any
role that can log in can send any payload on either channel. A payload only says "look": its
ids at most narrow which rows are read first. The master removes a lane's flows only when its
committed row says it ended (``viplanes.cluster.wakeups``) and the API answers a waiting request
from the lane's row read back, never from the payload's state.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from viplanes.domain.values import is_decimal
from viplanes.store.db import Database

log = logging.getLogger(__name__)

CHANNEL = "viplanes_lanes"  # API -> controllers: "lane:<id>" (installing), "ended:<id>"
DONE_CHANNEL = "viplanes_done"  # master -> API processes: "<id>=<state>,..." once committed


def notify(db: Database, payload: str) -> None:
    """Wake the controllers (PostgreSQL); a no-op on SQLite, where they poll."""
    if db.is_sqlite:
        return
    try:
        with db.write() as s:
            s.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": CHANNEL, "p": payload})
    except Exception as exc:
        log.warning("notify %s failed: %s", payload, str(exc).splitlines()[0])


class Notifier:
    """An API process's NOTIFYs on one autocommit connection of its own: one round trip each,
    where a pooled session costs a checkout ping, BEGIN and COMMIT. Falls back to ``notify``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._conn: Any = None
        self._lock = threading.Lock()

    def __call__(self, payload: str) -> None:
        if self.db.is_sqlite:
            return
        with self._lock:
            for _attempt in (1, 2):  # a connection the server dropped (a restart) is replaced once
                try:
                    if self._conn is None:
                        self._conn = raw_connection(self.db)
                    with self._conn.cursor() as cur:
                        cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                    return
                except Exception:
                    self.close()
        notify(self.db, payload)

    def close(self) -> None:
        close_quietly(self._conn)
        self._conn = None


def close_quietly(conn: Any) -> None:
    """Close a raw psycopg2 connection that may already be broken (the server restarted)."""
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def notify_done(s: Session | Connection, states: dict[int, str], activated_at: float | None = None) -> None:
    """Inside the transaction that recorded activations: wake the API processes at its commit
    (the lane manager's ``committed_hook`` on the controller). PostgreSQL only. An active lane
    carries its ``activated_at`` (``12=active@1795419573.97``) for log readers; the API reads
    the row back whatever the payload says (anyone may NOTIFY)."""
    dialect = s.get_bind().dialect if isinstance(s, Session) else s.dialect
    if dialect.name != "postgresql" or not states:
        return
    at = "" if activated_at is None else f"@{activated_at!r}"
    payload = ",".join(f"{lane_id}={state}{at if state == 'active' else ''}" for lane_id, state in states.items())
    start = 0
    while start < len(payload):  # NOTIFY payloads stop below 8000 bytes: cut between lanes
        cut = len(payload) if len(payload) - start <= 7000 else payload.rfind(",", start, start + 7000)
        s.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": DONE_CHANNEL, "p": payload[start:cut]})
        start = cut + 1


def parse_done(payload: str) -> dict[int, str]:
    """``"12=active,13=failed"`` -> {12: "active", 13: "failed"}; junk is skipped. A state may
    carry ``@<activated_at>`` (``DoneListener.deliver`` drops it). Which waiters to wake, no more."""
    out: dict[int, str] = {}
    for part in payload.split(","):
        lane_id, _, state = part.partition("=")
        if is_decimal(lane_id.strip()) and state:
            out[int(lane_id)] = state.strip()
    return out


def raw_connection(db: Database) -> Any:
    """A psycopg2 connection of its own (never one the pool lends to other threads), autocommit."""
    conn = db.raw_connection()  # the URL as given to libpq, with keepalives and timeouts
    conn.autocommit = True
    return conn


def listen_connection(db: Database, channel: str) -> Any:
    conn = raw_connection(db)
    with conn.cursor() as cur:
        cur.execute(f"LISTEN {channel}")
    return conn


class DoneWaiter:
    """One request thread waiting for one lane's outcome."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.state: str | None = None  # what the payload claimed: a hint, never an answer


class DoneListener:
    """An API process's one LISTEN connection on ``viplanes_done`` and the thread reading it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.ready = threading.Event()  # listening now: waiters can rely on notifications
        self._lock = threading.Lock()
        self._waiting: dict[int, list[DoneWaiter]] = {}
        self._started = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._started or self.db.is_sqlite:
                return
            self._started = True
        self._thread = threading.Thread(target=self._run, name="viplanes-done-listener", daemon=True)
        self._thread.start()

    def expect(self, lane_id: int) -> DoneWaiter:
        waiter = DoneWaiter()
        with self._lock:
            self._waiting.setdefault(lane_id, []).append(waiter)
        return waiter

    def forget(self, lane_id: int, waiter: DoneWaiter) -> None:
        with self._lock:
            waiters = self._waiting.get(lane_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiting.pop(lane_id, None)

    def deliver(self, states: dict[int, str]) -> None:
        with self._lock:
            woken = [(w, st) for lane_id, st in states.items() for w in self._waiting.get(lane_id, ())]
        for waiter, state in woken:
            waiter.state = state.partition("@")[0]  # an active lane's ``@activated_at`` is not used
            waiter.event.set()

    def _wake_all(self) -> None:
        """The connection broke: every waiter re-reads its row (a notification may be lost)."""
        with self._lock:
            waiters = [w for ws in self._waiting.values() for w in ws]
        for waiter in waiters:
            waiter.event.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = listen_connection(self.db, DONE_CHANNEL)
            except Exception as exc:
                log.warning("LISTEN %s failed: %s", DONE_CHANNEL, str(exc).splitlines()[0])
                self._stop.wait(1.0)
                continue
            self.ready.set()
            try:
                while not self._stop.is_set():
                    if select.select([conn], [], [], 1.0)[0]:
                        conn.poll()
                        while conn.notifies:
                            self.deliver(parse_done(conn.notifies.pop(0).payload))
            except Exception as exc:
                log.warning("LISTEN %s lost: %s", DONE_CHANNEL, str(exc).splitlines()[0])
            finally:
                self.ready.clear()
                self._wake_all()
                try:
                    conn.close()
                except Exception:
                    pass

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the thread and its connection; it sees the flag within one poll (1 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)


class Waker:
    """The controller's side: ``wait(timeout)`` returns early when an API process notified."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._conn: Any = None

    def _listen(self) -> Any:
        if self._conn is None and not self.db.is_sqlite:
            self._conn = listen_connection(self.db, CHANNEL)
        return self._conn

    def wait(self, timeout_s: float) -> list[str]:
        try:
            conn = self._listen()
        except Exception as exc:
            log.warning("LISTEN failed: %s", str(exc).splitlines()[0])
            conn = None
        if conn is None:
            time.sleep(timeout_s)
            return []
        try:
            if select.select([conn], [], [], timeout_s)[0]:
                conn.poll()
            payloads = [n.payload for n in conn.notifies]
            conn.notifies.clear()
            return payloads
        except Exception as exc:
            log.warning("LISTEN connection lost: %s", str(exc).splitlines()[0])
            self.close()
            time.sleep(min(timeout_s, 0.5))
            return []

    def close(self) -> None:
        close_quietly(self._conn)
        self._conn = None
