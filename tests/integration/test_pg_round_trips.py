"""Round trips of one lane on PostgreSQL (issue 44): ``serve``'s request, activation result and
release, counted as the server sees them (every statement, and BEGIN / COMMIT of a transaction
that is not autocommit). Each is a backend wake-up and a turn of the driver: the PostgreSQL
activation was 2.5x the OpenFlow floor where SQLite's was 1.9x. A lane stays safe: it is committed
``installing`` before the data plane carries it (its own transaction), and its outcome after; a
release sends its deletes before its end is committed (``removes_early``, serve's controller)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _round_trips(db: Any) -> tuple[list[str], Any]:
    """Record what reaches the server, one entry per round trip: BEGIN and COMMIT only off
    autocommit (psycopg2 sends nothing for them in autocommit), and the first word of every
    statement of each message."""
    seen: list[str] = []

    def sent(conn: Any) -> bool:
        return not conn.connection.dbapi_connection.autocommit

    def begin(conn: Any) -> None:
        if sent(conn):
            seen.append("BEGIN")

    def commit(conn: Any) -> None:
        if sent(conn):
            seen.append("COMMIT")

    def statement(_conn: Any, _cursor: Any, text: str, *_: Any) -> None:
        # one message, one round trip: ``BEGIN; EXECUTE ...`` is "BEGIN+EXECUTE"
        seen.append("+".join(part.split(None, 1)[0].upper() for part in text.split(";") if part.strip()))

    hooks = [("begin", begin), ("commit", commit), ("before_cursor_execute", statement)]
    for name, fn in hooks:
        event.listen(db.engine, name, fn)

    def stop() -> None:
        for name, fn in hooks:
            event.remove(db.engine, name, fn)

    return seen, stop


class EarlyRemovals(MemoryDataplane):
    """Declares what serve's in-process controller declares: deletes go out before the end is
    committed (``begin_deactivate``), activations in batches."""

    capabilities = PlaneCapabilities(batches=True, removes_early=True)

    def __init__(self) -> None:
        super().__init__()
        self.removals: list[int] = []

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Any:
        self.removals.append(lane_id)
        self.deactivate(lane_id)
        return lambda: None


@pytest.mark.parametrize("plane", [MemoryDataplane, EarlyRemovals])
def test_a_lane_costs_three_round_trips_and_its_release_one(pg_cluster, topo, plane) -> None:
    w = make_world(pg_cluster.new_database(), FakeClock(), plane(), topo)
    db = w.app.extensions["viplanes"].db
    try:
        for port in (9001, 9002, 9003):  # warm: tokens cached, hot statements prepared
            lane = w.lane("alice", dst_port=port)
            assert lane.status_code == 201, lane.json
            assert w.client.post(f"/api/v1/lanes/{lane.json['id']}/release", headers=w.h("alice")).status_code == 200
        seen, stop = _round_trips(db)
        try:
            lane = w.lane("alice", dst_port=9004)
            request = list(seen)
            seen.clear()
            released = w.client.post(f"/api/v1/lanes/{lane.json['id']}/release", headers=w.h("alice"))
            release = list(seen)
        finally:
            stop()
        assert lane.status_code == 201 and lane.json["state"] == "active", lane.json
        assert released.status_code == 200 and released.json["state"] == "released"
        # the decision's transaction: BEGIN, the grants' row locks, the advisory locks and the read
        # of everything the decision needs (grants, quota counts, overlap candidates, pool address)
        # in one message (viplanes/store/lanesql/gather.py); the lane + audit row (+ wake-up) as
        # one statement riding with the COMMIT. It was 9 round trips, then 6: BEGIN alone, and the
        # count, the locks, the overlap, the pool and COMMIT one each. Then the outcome
        # (conditional UPDATE + audit row) as ONE autocommit statement.
        assert request == ["BEGIN+EXECUTE+SELECT+EXECUTE", "EXECUTE+COMMIT", "EXECUTE"], request
        # lock, move, audit, wake-up: one statement (with serve's early deletes it was BEGIN,
        # SELECT ... FOR UPDATE, UPDATE, INSERT, COMMIT)
        assert release == ["EXECUTE"], release
        if plane is EarlyRemovals:  # the deletes still went before the end was written
            assert w.dataplane.removals[-1] == lane.json["id"]
        audit = w.client.get("/api/v1/audit?limit=3", headers=w.h("root")).json
        assert [(e["action"], e["decision"]) for e in audit][:3] == [
            ("lane.release", "done"),
            ("lane.activate", "done"),
            ("lane.request", "allow"),
        ], audit
    finally:
        db.dispose()
