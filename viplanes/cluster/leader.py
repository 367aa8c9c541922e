"""Which controller process is master of the switches: a lease row in the shared database.

No home-made consensus: the database serialises the one statement that takes or renews the
lease, ``UPDATE controller_lease ... WHERE holder = me OR expires_at < now``, and ``now`` is the
database's clock, so the processes' clocks never have to agree. ``epoch`` grows by one on every
change of holder and becomes the OpenFlow role ``generation_id``: a switch refuses a role request
with an older one (OFPRRFC_STALE), so a deposed master that still believes it leads cannot take a
switch back.

Timing (``LEASE_S`` 1.5 s, ``RENEW_S`` 0.3 s): five renewals per lease, so a stall of up to
1.2 s on a busy 2-core machine does not lose it (``viplanes.cluster.renewals`` logs the gaps and
slack measured, the failover soak reads them). A crashed holder is found sooner: its database
session ends with it, and a standby waiting on the holder's liveness lock takes the lease then
(``viplanes.cluster.liveness``; ``liveness=True``, as ``ControllerNode`` builds it). Without that
(a dead machine, a partition) a standby sleeps until just past the expiry (``standby_wait``).

The holder counts its lease from the *local* monotonic time taken *before* the statement went out,
plus ``LEASE_S``: the database granted it at or after that instant, so the local deadline never
outlives the database's (clock rates aside). It steps down at that deadline if no renewal answered.
A holder frozen *inside* its renewal (SIGSTOP, a VM paused between the UPDATE and its COMMIT)
keeps the lease row locked, and a standby's UPDATE would wait on that lock for as long as the
freeze lasts: no failover at all (a CI run caught it: 14 s with the master stopped, until it was
resumed). So on PostgreSQL each lease transaction first sets, for itself only,
``idle_in_transaction_session_timeout`` (half a lease: the server ends a session that sits in the
transaction that long, which rolls the renewal back and frees the row) and ``lock_timeout`` (one
renewal period: a standby's round reports an error instead of hanging, and tries again), and
``statement_timeout`` (one lease: no renewal statement runs past the lease it would renew).

The deadline is kept by a thread of its own (``_watch``) that never touches the database: a
master cut off from PostgreSQL had its renewal thread blocked inside the hung query (the
connection's packets dropped: nothing returns, whatever the server-side timeouts) and stayed
master until the partition healed, 12 s later. The watchdog steps it down at its local deadline
(``on_change(False, ...)``: SLAVE to the switches, the scheduler stopped), and the plane's writes
are gated on ``is_leader`` itself (``LaneRuntime.gate_writes``), so not one flow-mod leaves after
the deadline even before the watchdog has run. A renewal that answers only after the deadline it
would have extended does not count (the next round, if the lease is still ours, takes it again).

Works on SQLite too (one controller, ``viplanes serve``-style runs and unit tests).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from viplanes.cluster.liveness import MARK, HolderWatch, Liveness, holder_key
from viplanes.cluster.renewals import RenewalStats
from viplanes.store.db import Database

log = logging.getLogger(__name__)

LEASE_S = 1.5
RENEW_S = 0.3
EXPIRY_MARGIN_S = 0.02  # a standby's attempt lands this long after the row's expiry
LEASE_NAME = "controller"

_NOW = {"postgresql": "extract(epoch from clock_timestamp())", "sqlite": "((julianday('now') - 2440587.5) * 86400.0)"}

OnChange = Callable[[bool, int], None]  # (is_leader, epoch)

# one round trip: the three settings end with the transaction (set_config(..., is_local => true))
_GUARD_PG = text(
    "SELECT set_config('idle_in_transaction_session_timeout', :idle, true), set_config('lock_timeout', :lock, true), "
    "set_config('statement_timeout', :stmt, true)"
)


def now_sql(db: Database) -> str:
    """The database's clock in unix seconds, as SQL (the lease and the controller reports use it)."""
    return _NOW.get(db.engine.dialect.name, _NOW["postgresql"])


def default_holder() -> str:
    """Unique per process and readable in the table: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def standby_wait(left: float, renew_s: float) -> float:
    """A standby's sleep before its next attempt: its period, or until just past the holder's
    expiry (``left`` seconds away on the database's clock) when that comes first. A live holder
    renews long before: the attempt then fails, and the row read with it gives the new expiry."""
    return min(renew_s, max(0.0, left) + EXPIRY_MARGIN_S)


class LeaderLease:
    """Take, renew and give back one lease; ``on_change`` hears every gain and loss."""

    def __init__(
        self,
        db: Database,
        holder: str | None = None,
        name: str = LEASE_NAME,
        lease_s: float = LEASE_S,
        renew_s: float = RENEW_S,
        on_change: OnChange | None = None,
        liveness: bool = False,  # PostgreSQL: a crashed holder's lease taken at once (``liveness``)
    ) -> None:
        if renew_s >= lease_s:
            raise ValueError("renew period must be shorter than the lease")
        self.db = db
        self.holder = holder or default_holder()
        self.name = name
        self.lease_s = lease_s
        self.renew_s = renew_s
        self.on_change = on_change
        self.epoch = 0
        self.seen_epoch = 0  # the lease's epoch as last read, held by us or not
        self._deadline = 0.0  # local monotonic end of the lease we hold; 0 = not held
        self._leading = False
        self._now = now_sql(db)
        self._pg = db.engine.dialect.name == "postgresql"
        self._guard = {
            "idle": str(max(1, int(lease_s * 500))),
            "lock": str(max(1, int(renew_s * 1000))),
            "stmt": str(max(1, int(lease_s * 1000))),
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        # one gain or loss at a time: the renewal thread and the deadline watchdog both decide
        self._transition = threading.RLock()
        self._reclaim = threading.Event()
        # a standby's own view of the holder's renewals: the row as last read and the local
        # monotonic time it first read it so (see ``_stale_row``)
        self._seen: tuple[str, int, float] | None = None
        self._seen_at = 0.0
        self._left = 0.0  # a standby's last read: seconds left on the holder's lease (database clock)
        self.renewals = RenewalStats()  # the holder's renewal gaps and slack, logged now and then
        self._kick = threading.Event()  # wakes the lease thread before its period is over
        self._gone: str | None = None  # a holder whose session ended: its lease may be taken now
        self._holder_watch: HolderWatch | None = None
        if liveness and self._pg:
            alive = Liveness(db)
            if alive.hold(self.holder + MARK):
                self.holder += MARK
                self._holder_watch = HolderWatch(alive, self.holder, self._watched, self._holder_gone)
        self._ensure_row()

    def _ensure_row(self) -> None:
        with self.db.write() as s:
            s.execute(
                text(
                    "INSERT INTO controller_lease (name, holder, epoch, expires_at) "
                    "VALUES (:name, '', 0, 0) ON CONFLICT (name) DO NOTHING"
                ),
                {"name": self.name},
            )

    def _guard_transaction(self, s: Any) -> None:
        """A frozen peer's open renewal must not hold the row (see the module docstring)."""
        if self._pg:
            s.execute(_GUARD_PG, self._guard)

    @property
    def is_leader(self) -> bool:
        return self._leading and time.monotonic() < self._deadline

    def holds(self, s: Any) -> bool:
        """Inside a write transaction ``s``: is the lease ours, on the database's clock? The
        fence of a master-only write (``lanes/interruptions``): a node deposed while its
        scheduler is mid-round writes nothing. On PostgreSQL the row is read FOR SHARE, so a
        takeover's UPDATE waits until this transaction has committed."""
        if not self.is_leader:
            return False
        lock = " FOR SHARE" if self._pg else ""
        row = s.execute(
            text(
                f"SELECT 1 FROM controller_lease WHERE name = :name AND holder = :me AND expires_at > {self._now}{lock}"
            ),
            {"name": self.name, "me": self.holder},
        ).first()
        return row is not None

    def try_acquire(self) -> int | None:
        """One round: take or renew. The epoch while we hold the lease, else None."""
        sent_at = time.monotonic()
        stale = self._stale_row()
        gone, self._gone = self._gone, None
        # a holder whose session ended: its liveness lock is free, so ours for this transaction
        early = "OR (holder = :gh AND pg_try_advisory_xact_lock(:gk)) " if gone and self._pg else ""
        with self.db.write() as s:
            self._guard_transaction(s)
            row = s.execute(
                text(
                    f"UPDATE controller_lease SET "
                    f"epoch = CASE WHEN holder = :me THEN epoch ELSE epoch + 1 END, "
                    f"holder = :me, expires_at = {self._now} + :lease "
                    f"WHERE name = :name AND (holder = :me OR expires_at < {self._now} "
                    f"OR (holder = :sh AND epoch = :se AND expires_at = :sx) {early}) "
                    f"RETURNING epoch"
                ),
                {
                    "gh": gone,
                    "gk": holder_key(gone) if gone else None,
                    "me": self.holder,
                    "name": self.name,
                    "lease": self.lease_s,
                    "sh": stale[0] if stale else None,  # NULL: compares true with nothing
                    "se": stale[1] if stale else None,
                    "sx": stale[2] if stale else None,
                },
            ).first()
        if row is None:
            with self.db.read() as s:  # a standby's SLAVE role requests need the current generation
                seen = s.execute(
                    text(
                        f"SELECT holder, epoch, expires_at, expires_at - {self._now} "
                        "FROM controller_lease WHERE name = :name"
                    ),
                    {"name": self.name},
                ).first()
            self.seen_epoch = int(seen[1]) if seen is not None else 0
            self._left = float(seen[3]) if seen is not None else 0.0
            self._observe(None if seen is None else (str(seen[0]), int(seen[1]), float(seen[2])))
            return None
        self._seen = None
        self.seen_epoch = int(row[0])
        line = self.renewals.renewed(sent_at, time.monotonic(), self._deadline if self._leading else 0.0)
        if line:
            log.info("lease %s: %s", self.name, line)
        self._deadline = sent_at + self.lease_s
        return int(row[0])

    def _observe(self, row: tuple[str, int, float] | None) -> None:
        if row != self._seen:
            self._seen, self._seen_at = row, time.monotonic()

    def _stale_row(self) -> tuple[str, int, float] | None:
        """The lease row as last read, if it has not changed for a whole lease on *our* monotonic
        clock: its holder stopped renewing (every renewal writes a new ``expires_at``), whatever
        the database's clock says. A database clock stepped back kept a dead holder's lease
        "unexpired" for the size of the step; with this a standby takes over within
        ``lease_s + renew_s`` all the same. The holder's own deadline (local, from before its
        statement) has passed by then, so the two never lead at once (clock rates aside)."""
        if self._seen is None or time.monotonic() - self._seen_at < self.lease_s:
            return None
        return self._seen

    def reclaim(self) -> None:
        """A switch refused us while we hold the lease (it had seen our generation or a later
        one from a role request that timed out, a restored database): at the next round take
        a new epoch if the lease is still ours, so the role requests carry a generation the
        switches accept. Without it the holder stayed SLAVE with a live lease, so no standby
        took over and every lane waited ``installing``. Safe from any thread (a flag)."""
        self._reclaim.set()

    def _bump_epoch(self) -> int | None:
        with self.db.write() as s:
            self._guard_transaction(s)
            row = s.execute(
                text(
                    f"UPDATE controller_lease SET epoch = epoch + 1 "
                    f"WHERE name = :name AND holder = :me AND expires_at > {self._now} RETURNING epoch"
                ),
                {"me": self.holder, "name": self.name},
            ).first()
        return None if row is None else int(row[0])

    def release(self) -> None:
        """Give the lease back at once (clean shutdown): a standby need not wait for expiry. It
        ends *now* on the database's clock, not at 0, so the API processes can tell a hand-over
        under way from no controller at all (``RemoteDataplane.HANDOVER_GRACE_S``)."""
        self._deadline = 0.0
        with self.db.write() as s:
            s.execute(
                # 10 ms in the past: taking needs ``expires_at < now``, and SQLite's clock has ms steps
                text(
                    f"UPDATE controller_lease SET expires_at = {self._now} - 0.01 WHERE name = :name AND holder = :me"
                ),
                {"name": self.name, "me": self.holder},
            )

    def current(self) -> tuple[str, int, float]:
        """(holder, epoch, seconds left on the database's clock) — for status and tests."""
        with self.db.read() as s:
            holder, epoch, left = s.execute(
                text(f"SELECT holder, epoch, expires_at - {self._now} FROM controller_lease WHERE name = :name"),
                {"name": self.name},
            ).one()
        return str(holder), int(epoch), float(left)

    # --- the renewal loop ----------------------------------------------------------------------

    def round(self) -> bool:
        """Take/renew once and report a gain or loss; a database error counts as no answer."""
        if self._reclaim.is_set():
            self._reclaim.clear()
            try:
                bumped = self._bump_epoch()
            except Exception as exc:
                log.warning("lease %s: could not take a new epoch (%s)", self.name, str(exc).splitlines()[0])
                bumped = None
            if bumped is not None:
                log.warning(
                    "lease %s: a switch refused epoch %d while we hold the lease; now epoch %d",
                    self.name,
                    self.epoch,
                    bumped,
                )  # the renewal below reports the new epoch
        try:
            epoch = self.try_acquire()
        except Exception as exc:
            log.warning("lease %s: database error (%s)", self.name, str(exc).splitlines()[0])
            epoch = self.epoch if self.is_leader else None
        with self._transition:
            if epoch is not None and time.monotonic() >= self._deadline:
                log.warning("lease %s: the renewal answered after its own deadline; not counted", self.name)
                epoch = None
            if epoch is not None and (not self._leading or epoch != self.epoch):
                self._set(True, epoch)
            elif epoch is None and (self._leading or self.seen_epoch != self.epoch):
                self._set(False, self.seen_epoch if not self._leading else max(self.epoch, self.seen_epoch))
        return self.is_leader

    def _set(self, leading: bool, epoch: int) -> None:
        """A gain, a loss, or (not leading) a new epoch someone else took: on_change hears all."""
        with self._transition:
            self._change(leading, epoch)

    def _change(self, leading: bool, epoch: int) -> None:
        was, self._leading, self.epoch = self._leading, leading, epoch
        if not leading:
            self.renewals.lost()
        state = "now MASTER" if leading else "lost, now SLAVE" if was else "standby"
        log.info("lease %s: %s (epoch %d, holder %s)", self.name, state, epoch, self.holder)
        if self.on_change is not None:
            try:
                self.on_change(leading, epoch)
            except Exception:
                log.exception("lease %s: on_change", self.name)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="viplanes-lease", daemon=True)
        self._thread.start()
        self._watchdog = threading.Thread(target=self._watch, name="viplanes-lease-deadline", daemon=True)
        self._watchdog.start()
        if self._holder_watch is not None:
            self._holder_watch.start()

    def _run(self) -> None:
        while True:
            leading = self.round()
            wait = self.renew_s if leading else standby_wait(self._left, self.renew_s)
            self._kick.wait(wait)  # a holder's session ended (``_holder_gone``), or stop
            self._kick.clear()
            if self._stop.is_set():
                return

    def _watched(self) -> str | None:  # the holder a standby waits on; None while we lead
        seen = self._seen
        return None if self._leading or seen is None else seen[0]

    def _holder_gone(self, holder: str) -> None:
        """The holder's session ended (``HolderWatch``): try its lease now, not at its expiry."""
        log.info("lease %s: holder %s is gone from the database; taking over", self.name, holder)
        self._gone = holder
        self._kick.set()

    def expire_if_due(self) -> bool:
        """Step down if the lease we lead on has passed its local deadline (no database)."""
        with self._transition:
            if self._leading and time.monotonic() >= self._deadline:
                log.warning("lease %s: no renewal answered before the deadline; stepping down", self.name)
                self._set(False, self.epoch)
                return True
        return False

    def _watch(self) -> None:
        """Sleeps until the current deadline (it only moves later), then checks again: the
        step-down lands at the deadline itself however long a renewal hangs."""
        while True:
            self.expire_if_due()
            wait = self._deadline - time.monotonic() if self._leading else self.renew_s
            if self._stop.wait(min(max(0.0, wait), self.renew_s)):
                return

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        self._kick.set()
        if self._holder_watch is not None:
            self._holder_watch.stop()
        if self._watchdog is not None:
            self._watchdog.join(2.0)
        if self._thread is not None:
            self._thread.join(5.0)
        if release and self._leading:
            try:
                self.release()
            except Exception:
                log.warning("lease %s: could not give it back; it expires in %g s", self.name, self.lease_s)
            self._set(False, self.epoch)
