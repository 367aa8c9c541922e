"""The split controller records a hand-off round in ONE statement on PostgreSQL
(viplanes/store/lanesql/postgres.py ``record_in_one``): the same rows, audit and done-NOTIFY as the
general path (BEGIN, UPDATE + audit per lane, NOTIFY, COMMIT), in one round trip."""

from __future__ import annotations

import select
import time

import psycopg2
import pytest
from sqlalchemy import event, text

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.cluster.handoff import DONE_CHANNEL, parse_done
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.values import ActivationResult, LaneSpec
from viplanes.lanes.activation import OutcomeHooks

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


class BatchPlane(MemoryDataplane):
    """``activate_many`` as the controller's runtime has it; lane ``refuse`` fails for good, and
    lane ``ends`` is released by its owner while it installs."""

    capabilities = PlaneCapabilities(batches=True)

    def __init__(self) -> None:
        super().__init__()
        self.refuse: int | None = None
        self.ends: int | None = None
        self.end_it = lambda lane_id: None

    def activate_many(self, specs: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        out = {}
        for spec in specs:
            if spec.lane_id == self.ends:
                self.end_it(spec.lane_id)
            out[spec.lane_id] = (
                ActivationResult(False, "switch s1 refused: bad match", 0.001)
                if spec.lane_id == self.refuse
                else self.activate(spec)
            )
        return out


@pytest.fixture
def batch_world(pg_cluster, topo):
    w = make_world(pg_cluster.new_database(), FakeClock(), BatchPlane(), topo)
    yield w
    w.app.extensions["viplanes"].db.dispose()


def notified(listener: psycopg2.extensions.connection, within_s: float = 5.0) -> list[str]:
    """The payloads a committed NOTIFY brought: delivery is asynchronous, so a single ``poll()``
    right after the commit can find none yet (seen once under load)."""
    deadline = time.monotonic() + within_s
    while True:
        listener.poll()
        if listener.notifies or time.monotonic() >= deadline:
            return [n.payload for n in listener.notifies]
        select.select([listener], [], [], 0.1)


def test_a_round_is_recorded_audited_and_announced_in_one_statement(batch_world):
    w = batch_world
    ext = w.app.extensions["viplanes"]
    db, manager, plane = ext.db, ext.manager, w.dataplane
    ok, refused, ended = (w.lane(dst_port=port).json["id"] for port in (9001, 9002, 9003))
    with db.write_connection() as conn:  # back to installing: the controller's round finds them
        conn.execute(text("UPDATE lanes SET state = 'installing'"))

    def end_it(lane_id: int) -> None:
        with db.statement_connection() as conn:  # another process's end: one autocommit statement
            conn.execute(text("UPDATE lanes SET state = 'released' WHERE id = :i"), {"i": lane_id})

    plane.refuse, plane.ends, plane.end_it = refused, ended, end_it
    announced: list[dict[int, str]] = []
    manager.announce_outcomes(OutcomeHooks(done_channel=DONE_CHANNEL, announced=announced.append))
    statements: list[str] = []
    listener = psycopg2.connect(db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
    listener.autocommit = True
    listener.cursor().execute(f"LISTEN {DONE_CHANNEL}")
    # the round's statement by its parameters: serve's own outcomes ran it already, so it is
    # prepared and goes out as ``EXECUTE vl_N(...)``
    event.listen(
        db.engine,
        "before_cursor_execute",
        lambda *a: statements.append("record_in_one" if isinstance(a[3], dict) and "outcomes" in a[3] else a[2]),
    )
    try:
        plane.calls.clear()
        assert manager.recover() == 3
        payloads = notified(listener)
    finally:
        listener.close()
    now = w.clock()
    writes = [s for s in statements if s == "record_in_one"]
    assert len(writes) == 1 and not any("INSERT INTO audit_events" in s and "unnest" not in s for s in statements)
    # no transaction around the round: psycopg2 sends BEGIN / COMMIT as statements of their own, and
    # a write_connection's BEGIN rides in its first statement's text (viplanes/store/pgbegin.py)
    assert not any(s.strip().upper().startswith(("BEGIN", "COMMIT")) for s in statements), statements
    assert len(payloads) == 1 and parse_done(payloads[0]) == {ok: f"active@{now!r}", refused: "failed"}
    assert announced == [{ok: "active", refused: "failed"}]
    with db.read_connection() as conn:
        states = dict(conn.execute(text("SELECT id, state FROM lanes")).all())
        audit = conn.execute(
            text("SELECT target, decision, reason FROM audit_events WHERE action = 'lane.activate' ORDER BY id")
        ).all()
        reason, activated = conn.execute(
            text("SELECT reason, activated_at FROM lanes WHERE id = :i"), {"i": refused}
        ).one()
    assert states == {ok: "active", refused: "failed", ended: "released"}
    assert sorted(audit[-2:]) == sorted(
        [(f"lane:{ok}", "done", "installed"), (f"lane:{refused}", "failed", "switch s1 refused: bad match")]
    )
    assert reason == "activation failed: switch s1 refused: bad match"
    assert ("deactivate", ended) in plane.calls  # ended while installing: its flows go again
    assert ended not in plane.active and ok in plane.active


def test_a_request_inserts_audits_and_wakes_in_one_statement(batch_world):
    """The request transaction on PostgreSQL: both advisory locks in one SELECT, and the lane's
    INSERT, its audit row and the controllers' wake-up as one statement (was 3 + 2)."""
    from viplanes.cluster.handoff import CHANNEL

    w = batch_world
    db = w.app.extensions["viplanes"].db
    w.dataplane.capabilities = PlaneCapabilities(batches=True, wake_channel=CHANNEL)  # the split's channel
    statements: list[str] = []
    listener = psycopg2.connect(db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
    listener.autocommit = True
    listener.cursor().execute(f"LISTEN {CHANNEL}")
    event.listen(db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        r = w.lane(dst_port=9010)
        payloads = notified(listener)
    finally:
        listener.close()
    assert r.status_code == 201 and r.json["nat_ip"]
    lane_id = r.json["id"]
    assert payloads == [f"lane:{lane_id}"]
    inserted = next(i for i, s in enumerate(statements) if s.lstrip().startswith("WITH lane AS"))
    request = statements[: inserted + 1]  # the request's transaction; the activation follows
    assert sum("pg_advisory_xact_lock" in s for s in request) == 1
    assert sum("INSERT INTO audit_events" in s for s in request) == 1
    assert sum("pg_notify" in s for s in request) == 1
    with db.read_connection() as conn:
        audit = conn.execute(
            text("SELECT actor, decision, reason FROM audit_events WHERE action = 'lane.request' AND target = :t"),
            {"t": f"lane:{lane_id}"},
        ).all()
    assert audit == [("alice", "allow", "inside grant 1")]
