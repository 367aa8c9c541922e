"""SQLite's kept writer (``Database.write_connection``) after a COMMIT that failed: SQLite may
keep that transaction open (SQLITE_BUSY at COMMIT), and every later write on the same connection
then failed with "cannot start a transaction within a transaction" until the process restarted.
The failed transaction's rows are gone and the next write goes through."""

from __future__ import annotations

import pytest
from sqlalchemy import event, select

from viplanes.store.db import Database
from viplanes.store.models import AuditEvent


def _row(actor: str) -> dict[str, object]:
    return {"at": 1.0, "actor": actor, "action": "test", "target": "", "decision": "done", "reason": ""}


def test_a_failed_commit_leaves_the_writer_usable(sdb: Database) -> None:
    def lost(_conn: object) -> None:
        raise RuntimeError("COMMIT failed")

    event.listen(sdb.engine, "commit", lost)
    try:
        with pytest.raises(RuntimeError, match="COMMIT failed"), sdb.write_connection() as conn:
            conn.execute(AuditEvent.__table__.insert(), _row("lost"))
    finally:
        event.remove(sdb.engine, "commit", lost)
    for actor in ("next", "and the one after"):
        with sdb.write_connection() as conn:
            conn.execute(AuditEvent.__table__.insert(), _row(actor))
    with sdb.read() as s:
        assert s.scalars(select(AuditEvent.actor).order_by(AuditEvent.id)).all() == ["next", "and the one after"]
