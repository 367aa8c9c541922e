"""API -> controller hand-off through the shared database (issue 12, split deployment).

The API process commits the lane ``installing`` (the lane manager does that before it calls the
data plane) and ``RemoteDataplane.activate`` then wakes the controller and waits until the row
leaves ``installing``: the master controller's lane manager activates it (``recover``), confirms
with barriers and commits ``active`` or ``failed``. So the answer still means "installed on every
switch". If either side dies in between, the row stays ``installing`` and whichever controller is
master picks it up in its next recovery round; nothing lives only in a process.

Wake-up: PostgreSQL ``NOTIFY viplanes_lanes`` (the controller ``LISTEN``s with psycopg2); without
PostgreSQL the controller polls (``Waker.wait`` returns on its timeout). The API polls the row
(10 ms, backing off to 50 ms): one primary-key read per step, and it needs no extra connection per
waiting request, which LISTEN would.
"""
from __future__ import annotations

import logging
import select
import time
from typing import Any

from sqlalchemy import select as sql_select
from sqlalchemy import text

from viplanes.dataplane import DesiredLanes
from viplanes.db import Database
from viplanes.domain import ActivationResult, LaneCounters, LaneSpec
from viplanes.models import Lane

log = logging.getLogger(__name__)

CHANNEL = "viplanes_lanes"


def notify(db: Database, payload: str) -> None:
    """Wake the controllers (PostgreSQL); a no-op on SQLite, where they poll."""
    if db.is_sqlite:
        return
    try:
        with db.write() as s:
            s.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": CHANNEL, "p": payload})
    except Exception as exc:  # noqa: BLE001 - the controller's own rounds still find the lane
        log.warning("notify %s failed: %s", payload, str(exc).splitlines()[0])


class Waker:
    """The controller's side: ``wait(timeout)`` returns early when an API process notified."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._conn: Any = None

    def _listen(self) -> Any:
        if self._conn is None and not self.db.is_sqlite:
            import psycopg2  # its own connection: never one the pool lends to other threads

            url = self.db.engine.url.set(drivername="postgresql")
            conn = psycopg2.connect(url.render_as_string(hide_password=False))
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f"LISTEN {CHANNEL}")
            self._conn = conn
        return self._conn

    def wait(self, timeout_s: float) -> list[str]:
        try:
            conn = self._listen()
        except Exception as exc:  # noqa: BLE001 - database away: poll
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
        except Exception as exc:  # noqa: BLE001 - reconnect next time
            log.warning("LISTEN connection lost: %s", str(exc).splitlines()[0])
            self.close()
            time.sleep(min(timeout_s, 0.5))
            return []

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None


class RemoteDataplane:
    """The API process's data plane: the controller is another process, reached via the database."""

    carries_lane_sets = True  # the controller's compiler carries every shape the manager accepts

    def __init__(self, db: Database, poll_s: float = 0.01, max_poll_s: float = 0.05) -> None:
        self.db = db
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        return None  # the controller reads the database itself

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        t0 = time.perf_counter()
        notify(self.db, f"lane:{lane.lane_id}")
        deadline = time.monotonic() + timeout_s
        wait = self.poll_s
        while True:
            with self.db.read() as s:
                row = s.execute(sql_select(Lane.state, Lane.reason).where(Lane.id == lane.lane_id)).first()
            if row is None:
                return ActivationResult(False, "lane vanished", time.perf_counter() - t0)
            state, reason = row
            if state != "installing":  # active (or an extension re-send), failed, ended
                return ActivationResult(state == "active", reason or state, time.perf_counter() - t0)
            if time.monotonic() >= deadline:
                return ActivationResult(False, f"data plane busy: no controller confirmed within "
                                        f"{timeout_s:g} s", time.perf_counter() - t0)
            time.sleep(wait)
            wait = min(wait * 2, self.max_poll_s)

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        notify(self.db, f"ended:{lane_id}")  # the row is already ended; the master removes flows

    def counters(self, lane_id: int) -> LaneCounters | None:
        """What the master last published (every few seconds), with its age."""
        from viplanes.node_report import read_lane_counters

        return read_lane_counters(self.db, lane_id)

    def _master_alive(self) -> bool:
        now = "extract(epoch from clock_timestamp())" if not self.db.is_sqlite else \
            "((julianday('now') - 2440587.5) * 86400.0)"
        try:
            with self.db.read() as s:
                return bool(s.execute(text(f"SELECT count(*) FROM controller_lease WHERE holder <> '' "
                                           f"AND expires_at > {now}")).scalar())
        except Exception:  # noqa: BLE001 - the request itself will meet the outage
            return True

    def unready(self, lane: LaneSpec) -> list[str]:
        """No controller holds the lease (a failover under way): 503, try again."""
        return [] if self._master_alive() else ["controller (no master right now)"]

    def readiness(self) -> dict[str, Any]:
        """A master holds the lease and reports every switch connected and reconciled."""
        from viplanes.node_report import read_readiness

        return read_readiness(self.db)
