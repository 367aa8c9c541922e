"""Retention: ended lanes and audit events older than a configured age leave the database, each
row written to a JSON-lines file first.

Without it ``lanes`` and ``audit_events`` grew without bound (~90 MB/h at benchmark churn). What
goes, and what never does:

- a lane in a terminal state (expired, released, revoked, failed) whose ``ended_at`` is older than
  ``lane_days``, with its ``lane_counters`` row. Live lanes (requested, scheduled, installing,
  active) hold quota, a pool address and flows, and are never touched whatever their age; the
  guard is in the DELETE itself, not only in the SELECT before it.
- an audit event older than ``audit_days``.
- never the newest row of either table: SQLite gives a new row ``max(id) + 1``, so deleting the
  newest would hand its id (``lane:7`` in the audit log, a lane id a client kept) to the next row.

Nothing in the schema counts old rows for a quota or a rate window: quotas count live lanes, the
failed-authentication windows live in ``auth_failures`` (pruned by ``ratelimit``). Ages below one
day are refused (0 keeps a table forever), so a typo cannot erase the audit trail.

Order, per batch of ``batch`` rows, in one write transaction: select, append to the export file
(created 0600 with O_EXCL and O_NOFOLLOW, in a directory made 0700), fsync, then delete and
commit. A failed export rolls the batch back: no row leaves the database before it is on disk.
A crash between fsync and commit exports a batch twice, never zero times. On PostgreSQL an
advisory lock makes concurrent pruners (two controllers) take batches in turn, so no row is
exported twice by them. Each run that deleted something writes one ``db.prune`` audit event.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Table, delete, func, select

from viplanes.lanes import states
from viplanes.settings import DEFAULTS, Settings
from viplanes.store.db import Database
from viplanes.store.models import AuditEvent, Lane, LaneCounterRow
from viplanes.store.records import audit

log = logging.getLogger(__name__)

DAY_S = 86_400.0
LANE_DAYS = DEFAULTS.number("VIPLANES_LANE_RETENTION_DAYS")
AUDIT_DAYS = DEFAULTS.number("VIPLANES_AUDIT_RETENTION_DAYS")
EVERY_S = DEFAULTS.number("VIPLANES_PRUNE_EVERY_S")
BATCH = 500
EXPORT_DIR = DEFAULTS.text("VIPLANES_RETENTION_EXPORT_DIR")  # relative to the working directory, like ./viplanes.db
_PRUNE_LOCK = 0x7669_7072  # PostgreSQL advisory lock key ("vipr")
FIRST_RUN_S = 60.0  # a server restarted more often than every_s still prunes


class RetentionError(ValueError):
    """A setting or the export directory is unusable; nothing was deleted."""


@dataclass(frozen=True)
class RetentionConfig:
    """How long rows stay, where they go first and how often ``RetentionRunner`` prunes:
    VIPLANES_LANE_RETENTION_DAYS, VIPLANES_AUDIT_RETENTION_DAYS, VIPLANES_RETENTION_EXPORT_DIR,
    VIPLANES_PRUNE_EVERY_S (0: off), defaults in viplanes/settings/table.py."""

    lane_days: float = LANE_DAYS
    audit_days: float = AUDIT_DAYS
    export_dir: str = EXPORT_DIR
    every_s: float = EVERY_S
    batch: int = BATCH

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionConfig:
        return cls(
            lane_days=settings.number("VIPLANES_LANE_RETENTION_DAYS"),
            audit_days=settings.number("VIPLANES_AUDIT_RETENTION_DAYS"),
            export_dir=settings.text("VIPLANES_RETENTION_EXPORT_DIR") or EXPORT_DIR,
            every_s=settings.number("VIPLANES_PRUNE_EVERY_S"),
        )

    def check(self) -> None:
        for name, days in (("lane", self.lane_days), ("audit", self.audit_days)):
            if days != 0 and not days >= 1:
                raise RetentionError(f"{name} retention must be 0 (keep forever) or at least 1 day, not {days}")
        if self.batch < 1:
            raise RetentionError("batch must be at least 1")


@dataclass
class PruneResult:
    lanes: int = 0
    audit_events: int = 0
    files: list[str] = field(default_factory=list)

    def add_lanes(self, n: int) -> None:
        self.lanes += n

    def add_audit(self, n: int) -> None:
        self.audit_events += n

    def line(self) -> str:
        where = f"; exported to {', '.join(self.files)}" if self.files else ""
        return f"pruned {self.lanes} ended lanes and {self.audit_events} audit events{where}"


class _Export:
    """One JSON-lines file, opened on the first row (a run that prunes nothing leaves no file)."""

    def __init__(self, directory: Path, table: str, stamp: str) -> None:
        self.path = directory / f"{table}-{stamp}-{os.getpid()}.jsonl"
        self._file: IO[str] | None = None
        self.opened = False  # this run created the file (a planted one at the name is not ours)

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._file is None:
            export_directory(self.path.parent)  # made on the first row: a quiet run leaves no trace
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND
            self._file = os.fdopen(os.open(self.path, flags, 0o600), "w", encoding="utf-8")
            self.opened = True
            _fsync_dir(self.path.parent)
        self._file.write("".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> str | None:
        if self._file is None:
            return None
        self._file.close()
        return str(self.path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def export_directory(path: str | os.PathLike[str], create: bool = True) -> Path:
    """The export directory (``create``: made 0700 if missing); RetentionError if a file is in
    the way or it cannot be made."""
    d = Path(path)
    if create:
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RetentionError(f"export directory {d}: {exc.strerror or exc}") from None
    if (create or d.exists()) and not d.is_dir():
        raise RetentionError(f"export directory {d} is not a directory")
    return d


def _prune_table(
    db: Database, table: Table, where: list[Any], order: Any, out: _Export, batch: int, counted: Callable[[int], None]
) -> None:
    """Select, export, delete ``batch`` rows at a time; ``counted`` hears each committed batch."""
    while True:
        with db.write() as s:
            db.advisory_lock(s, _PRUNE_LOCK)
            newest = select(func.max(table.c.id)).scalar_subquery()
            rows = s.execute(select(table).where(*where, table.c.id < newest).order_by(order).limit(batch)).all()
            if not rows:
                return
            out.write([{"table": table.name, **r._asdict()} for r in rows])
            ids = [r.id for r in rows]
            if table.name == "lanes":
                s.execute(delete(LaneCounterRow).where(LaneCounterRow.lane_id.in_(ids)))
            s.execute(delete(table).where(table.c.id.in_(ids), *where))
        counted(len(rows))
        if len(rows) < batch:
            return


def prune(db: Database, config: RetentionConfig, now: float, actor: str = "system") -> PruneResult:
    """Export, then delete, what ``config`` says has aged out; audited when anything went."""
    config.check()
    directory = export_directory(config.export_dir, create=False)  # a file in the way fails before any row
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    result = PruneResult()
    lanes = Lane.__table__
    events = AuditEvent.__table__
    assert isinstance(lanes, Table) and isinstance(events, Table)
    exports: list[_Export] = []
    try:
        if config.lane_days:
            out = _Export(directory, "lanes", stamp)
            exports.append(out)
            ended = [
                lanes.c.state.in_(sorted(states.TERMINAL)),
                lanes.c.ended_at.is_not(None),
                lanes.c.ended_at < now - config.lane_days * DAY_S,
            ]
            try:
                _prune_table(db, lanes, ended, lanes.c.ended_at, out, config.batch, result.add_lanes)
            finally:
                out.close()
        if config.audit_days:
            out = _Export(directory, "audit", stamp)
            exports.append(out)
            try:
                old = [events.c.at < now - config.audit_days * DAY_S]
                _prune_table(db, events, old, events.c.at, out, config.batch, result.add_audit)
            finally:
                out.close()
    finally:  # what went is audited even when a later batch failed
        result.files = [str(e.path) for e in exports if e.opened]
        if result.lanes or result.audit_events:
            with db.write() as s:
                audit(s, now, actor, "db.prune", "lanes+audit", "done", result.line()[:2000])
    return result


class RetentionRunner:
    """``prune`` every ``config.every_s`` in a daemon thread (serve, controller cluster). A failed
    run is logged and tried again at the next period; nothing was deleted by it."""

    def __init__(self, db: Database, config: RetentionConfig, clock: Callable[[], float] = time.time) -> None:
        config.check()
        self.db = db
        self.config = config
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    def start(self) -> None:
        if self.config.every_s <= 0 or (not self.config.lane_days and not self.config.audit_days):
            log.info("retention: off")
            return
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
        self._thread.start()

    def run_once(self) -> PruneResult | None:
        try:
            result = prune(self.db, self.config, self.clock())
        except Exception as exc:
            log.warning("retention: prune failed, nothing deleted in the failed batch: %s", str(exc).splitlines()[0])
            return None
        finally:
            self.runs += 1
        if result.lanes or result.audit_events:
            log.info("retention: %s", result.line())
        return result

    def _run(self) -> None:
        wait = min(FIRST_RUN_S, self.config.every_s)
        while not self._stop.wait(wait):
            self.run_once()
            wait = self.config.every_s

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
