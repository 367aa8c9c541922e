"""A database lost while a lane is being activated is no verdict on the lane (a PostgreSQL
fail-over under requests, tests/integration/test_pg_failover.py): the first statement after the
primary's crash meets a pooled connection already closed. The lane stays installing and is
activated once the database is back; it is never recorded as failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.exc import InterfaceError

from tests.support.clock import FakeClock
from tests.support.world import World, ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.lanes.resolver import StaticResolver
from viplanes.store.db import Database
from viplanes.topologies.model import Topology


def closed() -> InterfaceError:
    """What psycopg2 raised through SQLAlchemy in the fail-over run."""
    return InterfaceError("SELECT 1", None, Exception("connection already closed"), connection_invalidated=True)


class LosesTheDatabaseOnce(MemoryDataplane):
    def __init__(self) -> None:
        super().__init__()
        self.raised = 0

    def activate(self, spec: Any, timeout_s: float = 5.0) -> Any:
        if self.raised == 0:
            self.raised += 1
            raise closed()
        return super().activate(spec)


def test_a_lane_whose_activation_met_a_lost_database_stays_installing_then_goes_active(
    sqlite_url: str, clock: FakeClock, dual: Topology
) -> None:
    plane = LosesTheDatabaseOnce()
    w: World = make(sqlite_url, clock, plane, dual, StaticResolver({}))
    try:
        r = ask(w, dst_ip="203.0.113.10", dst_port=9000)
        lane = r.get_json()
        assert r.status_code in (200, 201, 202), lane
        assert lane["state"] == "installing", lane
        assert "database unreachable" in (lane["reason"] or ""), lane
        assert w.app.extensions["viplanes"].manager.recover() == 1
        again = w.client.get(f"/api/v1/lanes/{lane['id']}", headers=w.h("alice")).get_json()
        assert again["state"] == "active", again
        assert lane["id"] in plane.active
    finally:
        w.app.extensions["viplanes"].db.dispose()


def test_the_split_deployments_wait_reads_through_a_fail_over(tmp_path: Path) -> None:
    """The API process's wait for the controller's verdict: a read that meets a closed
    connection is read again; the committed row, not the outage, is the answer."""
    db = Database(f"sqlite:///{tmp_path / 'remote.db'}")
    db.create_all()
    rows: list[Any] = [closed(), closed(), ("active", None, 12.5)]

    class Plane(RemoteDataplane):
        def _row_state(self, lane_id: int) -> tuple[str, str | None, float | None] | None:
            row = rows.pop(0) if len(rows) > 1 else rows[0]
            if isinstance(row, Exception):
                raise row
            return row  # type: ignore[no-any-return]

    try:
        plane = Plane(db)
        spec = type("Spec", (), {"lane_id": 7})()
        result = plane.activate(spec, timeout_s=2.0)  # type: ignore[arg-type]
        assert result.ok and result.committed_at == 12.5, result
        rows[:] = [closed()]  # the database stays away past the wait: a transient answer, never failed
        result = plane.activate(spec, timeout_s=0.3)  # type: ignore[arg-type]
        assert not result.ok and result.reason.startswith("data plane busy: database unreachable"), result
    finally:
        db.dispose()


def test_the_drivers_own_lost_connection_is_an_outage_too() -> None:
    """The second fail-over run: the prepared lane statements run on psycopg2's cursor, so the
    crash surfaced as a bare ``psycopg2.InterfaceError`` (no SQLAlchemy wrapper) and the lane was
    still recorded 'failed'."""
    import psycopg2

    from viplanes.lanes.outcomes import failed_by
    from viplanes.store.db import is_outage

    assert is_outage(psycopg2.InterfaceError("connection already closed"))
    assert is_outage(psycopg2.OperationalError("server closed the connection unexpectedly"))
    assert not is_outage(psycopg2.errors.UniqueViolation("duplicate key"))  # a bug or a race, not an outage
    assert failed_by(psycopg2.InterfaceError("connection already closed"), 0.0).reason.startswith("data plane busy")
    assert failed_by(psycopg2.InterfaceError(), 0.0).reason.endswith("(InterfaceError)")  # no text: its class
