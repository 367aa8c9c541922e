"""The API process's data plane when the controller is another process (the split deployment).

``RemoteDataplane.activate`` wakes the controllers and waits until the lane's row leaves
``installing``: the master controller's lane manager activates it, confirms with barriers and
commits ``active`` or ``failed``, so the answer still means "installed on every switch". The
answer is always the committed row read back: a notification only ends the wait early. The
wake-ups both ways (NOTIFY, the one listening connection per API process) are
``viplanes.cluster.handoff``'s; its docstring tells the whole hand-off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select as sql_select
from sqlalchemy import text

from viplanes.cluster.handoff import CHANNEL, DoneListener, DoneWaiter, Notifier
from viplanes.cluster.reports import read_lane_counters, read_readiness
from viplanes.dataplane.base import DesiredLanes, PlaneCapabilities, activate_each
from viplanes.domain.inspection import SwitchView
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec
from viplanes.store.db import Database, is_outage, outage_text
from viplanes.store.models import Lane

ALIVE_CACHE_S = 0.25  # how long the API trusts "a controller holds the lease" without asking
# a lease that ended less than this ago still counts as a master: a standby takes a released or
# expired lease within one renewal period (0.5 s) and then recovers every lane left
# ``installing``, so a request in that gap is accepted and waits (``activate``) instead of a 503.
# A graceful stop of the master gave clients 2.4-6.8 s of 503 without it (issue 28); a crash gave
# none only because its lease ran on for 2 s. Past the grace, no controller: 503 as before.
HANDOVER_GRACE_S = 2.5  # >= LEASE_S + RENEW_S of viplanes.cluster.leader (1.8 s), room for a slow standby


class RemoteDataplane:
    """The API process's data plane: the controller is another process, reached via the database."""

    # an ok answer means the controller already committed the lane active; the lane service
    # NOTIFYs the controllers on CHANNEL inside the transaction that commits a lane or its end
    capabilities = PlaneCapabilities(records_outcome=True, wake_channel=CHANNEL)

    def __init__(self, db: Database, poll_s: float = 0.01, max_poll_s: float = 0.05, recheck_s: float = 0.5) -> None:
        self.db = db
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.recheck_s = recheck_s  # listening: read the row if no word came within this
        self.listener = DoneListener(db)
        self.listener.start()
        self.notify = Notifier(db)
        self._alive_until = 0.0  # monotonic: a master was seen holding the lease until then
        # lane id -> (monotonic, waiter): registered by ``expect_wake`` inside the request's transaction
        self._woken: dict[int, tuple[float, DoneWaiter | None]] = {}
        self._woken_lock = threading.Lock()

    def expect_wake(self, payload: str) -> None:
        """The lane service NOTIFYs the controllers inside the transaction that commits the lane
        (``lane:<id>``): PostgreSQL delivers it at the commit, so the wake-up costs no round trip
        of its own and can never run ahead of the row. The waiter is registered first (the
        controller's answer may come right after the commit); ``activate`` takes it over and
        sends nothing."""
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

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        return None  # the controller reads the database itself

    def _row_state(self, lane_id: int) -> tuple[str, str | None, float | None] | None:
        """(state, reason, activated_at) of the committed row: the only thing an answer rests on.
        One statement in autocommit (PostgreSQL): one round trip on the answer's path."""
        with self.db.read_connection() as conn:
            row = conn.execute(sql_select(Lane.state, Lane.reason, Lane.activated_at).where(Lane.id == lane_id)).first()
        return None if row is None else (row[0], row[1], row[2])

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        with self._woken_lock:
            woken = self._woken.pop(lane.lane_id, None)
        if woken is not None:  # notified inside the request's transaction (``expect_wake``)
            waiter = woken[1]
        else:
            listening = self.listener.ready.is_set()
            waiter = self.listener.expect(lane.lane_id) if listening else None  # before the wake-up
        outage = ""  # the database's last error while waiting: a fail-over is waited out, not judged
        try:
            if woken is None:
                outage = self._quietly(lambda: self.notify(f"lane:{lane.lane_id}"))
            wait = self.poll_s
            while True:
                if waiter is not None and self.listener.ready.is_set() and not outage:
                    # a notification only says "look": anyone who can log in may send one
                    waiter.event.wait(max(0.0, min(self.recheck_s, deadline - time.monotonic())))
                    waiter.event.clear()
                try:
                    row = self._row_state(lane.lane_id)
                except Exception as exc:
                    if not is_outage(exc):
                        raise
                    outage, row = outage_text(exc), None
                else:
                    outage = ""
                    if row is None:
                        return ActivationResult(False, "lane vanished", time.perf_counter() - t0)
                if row is not None and row[0] != "installing":  # active (or an extension re-send), failed, ended
                    state, reason, activated_at = row
                    return ActivationResult(  # interrupted: carried, held for want of a usable path
                        state in ("active", "interrupted"),
                        reason or state,
                        time.perf_counter() - t0,
                        committed_at=activated_at if state == "active" else None,
                        held=state == "interrupted",
                    )
                if time.monotonic() >= deadline:
                    why = f"database unreachable ({outage})" if outage else "no controller confirmed"
                    return ActivationResult(
                        False, f"data plane busy: {why} within {timeout_s:g} s", time.perf_counter() - t0
                    )
                if outage or waiter is None or not self.listener.ready.is_set():
                    time.sleep(wait)
                    wait = min(wait * 2, self.max_poll_s)
        finally:
            if waiter is not None:
                self.listener.forget(lane.lane_id, waiter)

    @staticmethod
    def _quietly(send: Callable[[], None]) -> str:
        """Send a wake-up; "" when sent, else the outage that stopped it (the wait reads anyway:
        the master recovers every installing lane when it reconnects)."""
        try:
            send()
        except Exception as exc:
            if not is_outage(exc):
                raise
            return outage_text(exc)
        return ""

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        return activate_each(self, lanes, timeout_s)  # the master batches what it takes per round

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None] | None:
        return None  # the master removes the flows once the row says the lane ended

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        self.notify(f"ended:{lane_id}")  # the row is already ended; the master removes flows

    def counters(self, lane_id: int) -> LaneCounters | None:
        """What the master last published (every few seconds), with its age."""
        return read_lane_counters(self.db, lane_id)

    def _master_alive(self) -> bool:
        """Some controller holds an unexpired lease, or held one until less than
        ``HANDOVER_GRACE_S`` ago (a hand-over under way). A yes is remembered for at most
        ``ALIVE_CACHE_S`` and never past that grace: one query per request saved."""
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
        if left is None or float(left) + HANDOVER_GRACE_S <= 0:
            return False
        self._alive_until = time.monotonic() + min(float(left) + HANDOVER_GRACE_S, ALIVE_CACHE_S)
        return True

    def unready(self, lane: LaneSpec) -> list[str]:
        """No controller holds the lease (a failover under way): 503, try again."""
        return [] if self._master_alive() else ["controller (no master right now)"]

    def readiness(self) -> dict[str, Any]:
        """A master holds the lease and reports every switch connected and reconciled."""
        return read_readiness(self.db)

    # ---- what only the controller process has: no switches, links or listener here ----------
    def watch_counts(self, watches: list[FlowWatch], seconds: float) -> list[int] | None:
        return None  # no switches of its own to watch: no takeover of running NAT'd connections

    def when_ready(self, wake: Callable[[], None]) -> None:
        return None  # the controllers' switches: their readiness wakes their own scheduler

    def interrupted(self) -> dict[int, str]:
        return {}

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        return 0, ()

    def switch_facts(self) -> dict[str, SwitchFacts]:
        return {}

    def openflow_transport(self) -> str | None:
        return None

    def switch_view(self) -> SwitchView | None:
        return None

    def start(self) -> None:
        return None  # the listener started with the plane: a request may wait from the first one

    def stop(self) -> None:
        """End the listening thread and close the NOTIFY connection: a plane left running kept
        retrying LISTEN every second after its database was gone (CI run 47's last line)."""
        self.listener.stop()
        self.notify.close()
