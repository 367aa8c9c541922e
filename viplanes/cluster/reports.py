"""What the master controller sees, published in the shared database for the API processes.

In the split deployment an API worker has no switch connection: /readyz and the lane counters
would know nothing. So the master writes, and the API reads:

- every ``STATUS_EVERY_S`` (1 s): its switches' readiness (connected, reconciled since the
  latest connect) into ``controller_status``, with its holder name and epoch;
- every ``COUNTERS_EVERY_S`` (5 s): each carried lane's packets/bytes (one flow-stats request
  per switch, ``controller.lanestats``) into ``lane_counters``, only the rows that changed.

Times are the database's clock, so an API process on another machine computes ages without
trusting its own. A report older than ``STALE_S`` or written by anyone but the current lease
holder does not count: /readyz then lists no switch and says not ready.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import text

from viplanes.cluster.leader import LEASE_NAME, now_sql
from viplanes.domain.values import LaneCounters
from viplanes.store.db import Database

log = logging.getLogger(__name__)

STATUS_EVERY_S = 1.0
COUNTERS_EVERY_S = 5.0
STALE_S = 5.0


class ReportedPlane(Protocol):
    """What the reporter reads of the controller's data plane (a ``RoleController``)."""

    is_master: bool  # only the master publishes
    epoch: int  # the OpenFlow role generation it claimed the switches with

    def readiness(self) -> dict[str, Any]: ...

    def all_lane_counters(self) -> dict[int, LaneCounters]:
        """The counters of every lane it carries (one flow-stats request per ingress switch)."""
        ...


class StatusReporter:
    """The controller node's publishing thread; writes only while ``plane.is_master``."""

    def __init__(
        self,
        db: Database,
        plane: ReportedPlane,
        holder: str,
        read_counters: Callable[[ReportedPlane], dict[int, LaneCounters]] | None = None,
        status_every_s: float = STATUS_EVERY_S,
        counters_every_s: float = COUNTERS_EVERY_S,
    ) -> None:
        self.db, self.plane, self.holder = db, plane, holder
        self.read_counters: Callable[[ReportedPlane], dict[int, LaneCounters]] = read_counters or (
            lambda p: p.all_lane_counters()
        )
        self.status_every_s, self.counters_every_s = status_every_s, counters_every_s
        self._published: dict[int, tuple[int, int]] = {}  # lane -> (packets, bytes) last written
        self._next_counters = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._now = now_sql(db)

    def publish_status(self) -> None:
        switches = self.plane.readiness().get("switches", [])
        with self.db.write() as s:
            s.execute(
                text(
                    f"INSERT INTO controller_status (name, holder, epoch, switches, reported_at) "
                    f"VALUES (:name, :holder, :epoch, :switches, {self._now}) "
                    f"ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, "
                    f"switches = excluded.switches, reported_at = excluded.reported_at"
                ),
                {
                    "name": LEASE_NAME,
                    "holder": self.holder,
                    "epoch": self.plane.epoch,
                    "switches": json.dumps(switches),
                },
            )

    def publish_counters(self) -> int:
        """Write the lanes whose counters changed since the last write; how many rows."""
        read = self.read_counters(self.plane)
        changed = [
            {"lane": lane_id, "p": c.packets, "b": c.bytes}
            for lane_id, c in read.items()
            if self._published.get(lane_id) != (c.packets, c.bytes)
        ]
        if changed:
            with self.db.write() as s:
                s.execute(
                    text(
                        f"INSERT INTO lane_counters (lane_id, packets, bytes, read_at) "
                        f"VALUES (:lane, :p, :b, {self._now}) "
                        f"ON CONFLICT (lane_id) DO UPDATE SET packets = excluded.packets, "
                        f"bytes = excluded.bytes, read_at = excluded.read_at"
                    ),
                    changed,
                )
        self._published = {lane_id: (c.packets, c.bytes) for lane_id, c in read.items()}
        return len(changed)

    def round(self) -> None:
        if not self.plane.is_master:
            self._published.clear()  # a master again later rewrites everything once
            return
        self.publish_status()
        if time.monotonic() >= self._next_counters:
            self._next_counters = time.monotonic() + self.counters_every_s
            self.publish_counters()

    def _run(self) -> None:
        while not self._stop.wait(self.status_every_s):
            try:
                self.round()
            except Exception as exc:
                log.warning("controller report: %s", str(exc).splitlines()[0])

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="viplanes-report", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)


# --- the API side ------------------------------------------------------------------------------


def read_readiness(db: Database) -> dict[str, Any]:
    """/readyz in the split deployment: is there a master, and which switches it reports as
    connected and reconciled (its latest report, if fresh and its own)."""
    now = now_sql(db)
    with db.read() as s:
        row = s.execute(
            text(
                f"SELECT l.holder, l.epoch, l.expires_at > {now}, c.holder, c.switches, {now} - c.reported_at "
                f"FROM controller_lease l LEFT JOIN controller_status c ON c.name = l.name "
                f"WHERE l.name = :name"
            ),
            {"name": LEASE_NAME},
        ).first()
    if row is None:
        return {"ready": False, "master": False, "master_holder": None, "switches": []}
    holder, epoch, alive, reporter, switches, age = row
    alive = bool(alive) and bool(holder)
    fresh = alive and reporter == holder and age is not None and age <= STALE_S
    listed = json.loads(switches) if fresh and switches else []
    return {
        "ready": bool(fresh and listed and all(sw.get("reconciled") for sw in listed)),
        "master": alive,
        "master_holder": holder if alive else None,
        "epoch": int(epoch),
        "report_age_s": round(float(age), 2) if age is not None else None,
        "switches": listed,
    }


def read_lane_counters(db: Database, lane_id: int) -> LaneCounters | None:
    """The lane's counters as the master last published them, with their age; None if never."""
    with db.read() as s:
        row = s.execute(
            text(f"SELECT packets, bytes, {now_sql(db)} - read_at FROM lane_counters WHERE lane_id = :lane"),
            {"lane": lane_id},
        ).first()
    if row is None:
        return None
    return LaneCounters(packets=int(row[0]), bytes=int(row[1]), age_s=round(max(0.0, float(row[2])), 2))
