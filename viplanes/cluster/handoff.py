"""API -> controller hand-off through the shared database (issue 12, split deployment).

The API process commits the lane ``installing`` (the lane manager does that before it calls the
data plane) and ``RemoteDataplane.activate`` then wakes the controller and waits until the row
leaves ``installing``: the master controller's lane manager activates it (``recover``), confirms
with barriers and commits ``active`` or ``failed``. So the answer still means "installed on every
switch". If either side dies in between, the row stays ``installing`` and whichever controller is
master picks it up in its next recovery round; nothing lives only in a process.

Wake-up both ways: PostgreSQL ``NOTIFY viplanes_lanes`` wakes the controllers (``Waker``); the
master's lane manager NOTIFYs ``viplanes_done`` with ``id=state,...`` inside the very transaction
that records the outcomes (``notify_done``, delivered at commit), and each API process has ONE
listening connection (``DoneListener``) whose thread wakes the request threads waiting for those
lanes: a waiting request costs no query and answers as soon as the commit is done. A lane not
heard of within ``recheck_s`` (a lost notification, a listener reconnecting) is read from its row,
and without PostgreSQL (or while the listener is down) the API polls the row as before (10 ms,
backing off to 50 ms); the controller then polls too (``Waker.wait`` returns on its timeout).
"""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy import select as sql_select
from sqlalchemy.orm import Session

from viplanes.dataplane.base import DesiredLanes
from viplanes.domain.values import ActivationResult, LaneCounters, LaneSpec, is_decimal
from viplanes.store.db import Database
from viplanes.store.models import Lane

log = logging.getLogger(__name__)

CHANNEL = "viplanes_lanes"  # API -> controllers: "lane:<id>" (installing), "ended:<id>"
ALIVE_CACHE_S = 0.25  # how long the API trusts "a controller holds the lease" without asking
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
    """Inside the transaction that recorded activations: tell the API processes at its commit
    (the lane manager's ``committed_hook`` on the controller). PostgreSQL only. An active lane
    carries its ``activated_at`` (``12=active@1795419573.97``): the API answers without reading
    the row back."""
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
    carry ``@<activated_at>`` (``DoneListener.deliver`` splits it off)."""
    out: dict[int, str] = {}
    for part in payload.split(","):
        lane_id, _, state = part.partition("=")
        if is_decimal(lane_id.strip()) and state:
            out[int(lane_id)] = state.strip()
    return out


def raw_connection(db: Database) -> Any:
    """A psycopg2 connection of its own (never one the pool lends to other threads), autocommit."""
    import psycopg2

    url = db.engine.url.set(drivername="postgresql")
    conn = psycopg2.connect(url.render_as_string(hide_password=False))
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
        self.state: str | None = None
        self.activated_at: float | None = None  # from the payload, when the controller sent it


class DoneListener:
    """An API process's one LISTEN connection on ``viplanes_done`` and the thread reading it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.ready = threading.Event()  # listening now: waiters can rely on notifications
        self._lock = threading.Lock()
        self._waiting: dict[int, list[DoneWaiter]] = {}
        self._started = False
        self._stop = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self._started or self.db.is_sqlite:
                return
            self._started = True
        threading.Thread(target=self._run, name="viplanes-done-listener", daemon=True).start()

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
            state, _, at = state.partition("@")
            try:
                waiter.activated_at = float(at) if at else None
            except ValueError:
                waiter.activated_at = None
            waiter.state = state
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

    def stop(self) -> None:
        self._stop.set()


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


class RemoteDataplane:
    """The API process's data plane: the controller is another process, reached via the database."""

    wake_channel = CHANNEL  # an ended lane's NOTIFY may ride in the statement that ends it
    carries_lane_sets = True  # the controller's compiler carries every shape the manager accepts
    records_outcome = True  # an ok answer means the controller already committed the lane active

    def __init__(self, db: Database, poll_s: float = 0.01, max_poll_s: float = 0.05, recheck_s: float = 0.5) -> None:
        self.db = db
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.recheck_s = recheck_s  # listening: read the row if no word came within this
        self.listener = DoneListener(db)
        self.listener.start()
        self.notify = Notifier(db)
        self._alive_until = 0.0  # monotonic: a master was seen holding the lease until then
        # lane id -> (monotonic, waiter): woken by ``wake_in`` inside the request's transaction
        self._woken: dict[int, tuple[float, DoneWaiter | None]] = {}
        self._woken_lock = threading.Lock()

    def wake_in(self, conn: Connection, payload: str, sent: bool = False) -> bool:
        """NOTIFY the controllers inside the transaction that commits the lane (``lane:<id>``)
        or its end (``ended:<id>``): PostgreSQL delivers it at the commit, so the wake-up costs
        no round trip of its own and can never run ahead of the row. For ``lane:<id>`` the
        waiter is registered first (the controller's answer may come right after the commit);
        ``activate`` takes it over and sends nothing. False on SQLite: nothing was sent.
        ``sent``: the caller's statement NOTIFYed already (``insert_in_one``): register only."""
        if self.db.is_sqlite:
            return False
        if payload.startswith("lane:"):
            lane_id = int(payload[5:])
            waiter = self.listener.expect(lane_id) if self.listener.ready.is_set() else None
            now = time.monotonic()
            with self._woken_lock:
                for old_id, (at, old) in list(self._woken.items()):
                    if now - at > 60.0:  # its transaction rolled back: nobody will activate it
                        del self._woken[old_id]
                        if old is not None:
                            self.listener.forget(old_id, old)
                self._woken[lane_id] = (now, waiter)
        if not sent:
            conn.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": CHANNEL, "p": payload})
        return True

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        return None  # the controller reads the database itself

    def _row_state(self, lane_id: int) -> tuple[str, str | None] | None:
        with self.db.read() as s:
            row = s.execute(sql_select(Lane.state, Lane.reason).where(Lane.id == lane_id)).first()
        return None if row is None else (row[0], row[1])

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        with self._woken_lock:
            woken = self._woken.pop(lane.lane_id, None)
        if woken is not None:  # notified inside the request's transaction (``wake_in``)
            waiter = woken[1]
        else:
            listening = self.listener.ready.is_set()
            waiter = self.listener.expect(lane.lane_id) if listening else None  # before the wake-up
        try:
            if woken is None:
                self.notify(f"lane:{lane.lane_id}")
            wait = self.poll_s
            while True:
                if waiter is not None and self.listener.ready.is_set():
                    heard = waiter.event.wait(max(0.0, min(self.recheck_s, deadline - time.monotonic())))
                    if heard and waiter.state == "active":  # committed: no need to read it back
                        return ActivationResult(
                            True, "active", time.perf_counter() - t0, committed_at=waiter.activated_at
                        )
                    waiter.event.clear()
                row = self._row_state(lane.lane_id)
                if row is None:
                    return ActivationResult(False, "lane vanished", time.perf_counter() - t0)
                state, reason = row
                if state != "installing":  # active (or an extension re-send), failed, ended
                    return ActivationResult(state == "active", reason or state, time.perf_counter() - t0)
                if time.monotonic() >= deadline:
                    return ActivationResult(
                        False,
                        f"data plane busy: no controller confirmed within {timeout_s:g} s",
                        time.perf_counter() - t0,
                    )
                if waiter is None or not self.listener.ready.is_set():
                    time.sleep(wait)
                    wait = min(wait * 2, self.max_poll_s)
        finally:
            if waiter is not None:
                self.listener.forget(lane.lane_id, waiter)

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        self.notify(f"ended:{lane_id}")  # the row is already ended; the master removes flows

    def counters(self, lane_id: int) -> LaneCounters | None:
        """What the master last published (every few seconds), with its age."""
        from viplanes.cluster.reports import read_lane_counters

        return read_lane_counters(self.db, lane_id)

    def _master_alive(self) -> bool:
        """Some controller holds an unexpired lease. A yes is remembered for at most
        ``ALIVE_CACHE_S`` and never past that lease's own expiry: one query per request saved."""
        if time.monotonic() < self._alive_until:
            return True
        now = (
            "extract(epoch from clock_timestamp())"
            if not self.db.is_sqlite
            else "((julianday('now') - 2440587.5) * 86400.0)"
        )
        try:
            with self.db.read() as s:
                left = s.execute(
                    text(f"SELECT max(expires_at) - {now} FROM controller_lease WHERE holder <> ''")
                ).scalar()
        except Exception:
            return True
        if left is None or left <= 0:
            return False
        self._alive_until = time.monotonic() + min(float(left), ALIVE_CACHE_S)
        return True

    def unready(self, lane: LaneSpec) -> list[str]:
        """No controller holds the lease (a failover under way): 503, try again."""
        return [] if self._master_alive() else ["controller (no master right now)"]

    def readiness(self) -> dict[str, Any]:
        """A master holds the lease and reports every switch connected and reconciled."""
        from viplanes.cluster.reports import read_readiness

        return read_readiness(self.db)
