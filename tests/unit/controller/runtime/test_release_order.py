"""A release deletes an active lane's flows while its end is committed, not after (issue 13):
the owner is checked first, the answer still waits for the commit and every barrier, and a failed
commit leaves the flows removed (fail closed) with the runtime free for the next change."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser
from sqlalchemy import event

from tests.support.clock import T0, FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.store import campus_topology, lane_input, principals
from viplanes.controller.compile.cookies import EXACT_MASK, lane_cookie
from viplanes.errors import NotFound
from viplanes.lanes.manager import LaneManager
from viplanes.store.models import Lane


def _world(db):
    topo, clock = campus_topology(), FakeClock(T0)
    switches = FakeSwitches(topo, clock)
    runtime = inline_runtime(topo, clock, switches, base_flows=True)
    mgr = LaneManager(db, runtime, topo, clock=clock)
    runtime.attach_source(mgr.desired_lanes)
    callers = principals(db, ("alice", "researcher"), ("bob", "researcher"))
    lane, _ = mgr.request(callers["alice"], lane_input())
    assert lane.state == "active"
    return mgr, runtime, switches, callers, lane


def _flows_on_switches(switches: FakeSwitches, lane_id: int) -> int:
    return sum(len(t.stats(lane_cookie(lane_id), EXACT_MASK, T0)) for t in switches.net.tables.values())


def _committed_state(db, lane_id: int) -> str:
    with db.read() as s:  # another connection: sees only what is committed
        return s.get(Lane, lane_id).state


def test_release_sends_the_deletes_before_the_end_is_committed(db):
    mgr, runtime, switches, callers, lane = _world(db)
    assert _flows_on_switches(switches, lane.id) > 0
    committed_when_sent: list[str] = []
    send = switches.send

    def watching_send(dpid, ofmsgs):
        if any(isinstance(m, parser.OFPFlowMod) for m in ofmsgs):
            committed_when_sent.append(_committed_state(db, lane.id))
        return send(dpid, ofmsgs)

    runtime.send = watching_send
    ended = mgr.end(callers["alice"], lane.id, "released")
    assert ended.state == "released" and _committed_state(db, lane.id) == "released"
    # the deletes went out while the row was still committed active (before: after the commit)
    assert committed_when_sent and set(committed_when_sent) == {"active"}
    assert _flows_on_switches(switches, lane.id) == 0  # and were confirmed before the answer


def test_someone_elses_release_touches_no_switch(db):
    mgr, runtime, switches, callers, lane = _world(db)
    switches.sent.clear()
    with pytest.raises(NotFound):
        mgr.end(callers["bob"], lane.id, "released")
    assert switches.sent == [] and _flows_on_switches(switches, lane.id) > 0
    assert _committed_state(db, lane.id) == "active"


@contextlib.contextmanager
def _audit_write_fails(db) -> Iterator[None]:
    """The end's audit row cannot be written: the database refuses the statement that carries it
    (SQLite: the INSERT inside the write transaction; PostgreSQL: the one statement that locks,
    moves and audits, ``end_in_one``). Injected at the engine, below whichever path ends the lane."""

    def refuse(_conn, _cursor, statement, *_args):
        if "INSERT INTO audit_events" in statement:
            raise RuntimeError("database went away")

    event.listen(db.engine, "before_cursor_execute", refuse)
    try:
        yield
    finally:
        event.remove(db.engine, "before_cursor_execute", refuse)


def test_a_failed_commit_leaves_the_flows_removed_and_the_runtime_usable(db):
    mgr, runtime, switches, callers, lane = _world(db)
    with _audit_write_fails(db), pytest.raises(RuntimeError, match="database went away"):
        mgr.end(callers["alice"], lane.id, "released")
    assert _committed_state(db, lane.id) == "active"  # rolled back...
    assert _flows_on_switches(switches, lane.id) == 0  # ...but the flows are gone: fail closed
    assert runtime.state.change.acquire(blocking=False)  # the change lock was given back
    runtime.state.change.release()
    second, _ = mgr.request(callers["alice"], lane_input(port=9001))
    assert second.state == "active" and _flows_on_switches(switches, second.id) > 0


_WRITES = re.compile(r"\b(UPDATE\s+lanes|INSERT\s+INTO|DELETE\s+FROM)\b", re.IGNORECASE)


@contextlib.contextmanager
def _order_of_deletes_and_writes(mgr, runtime, switches) -> Iterator[list[str]]:
    """Record, in order, when the deletes reach the switches and when a write starts: a write
    transaction opens (SQLite, and PostgreSQL's path for a lane it cannot end in one statement),
    or a statement that changes a row reaches the database (PostgreSQL's one-statement end,
    ``end_at_once``, on an autocommit connection that reads use too)."""
    events: list[str] = []
    send, db = switches.send, mgr.db
    write = db.write_connection

    def watching_send(dpid, ofmsgs):
        if any(isinstance(m, parser.OFPFlowMod) and m.command == 3 for m in ofmsgs):  # OFPFC_DELETE
            events.append("deletes")
        return send(dpid, ofmsgs)

    def watching_write():
        events.append("write")
        return write()

    def watching_statement(_conn, _cursor, statement, *_args):
        if _WRITES.search(statement):
            events.append("write")

    runtime.send = watching_send
    db.write_connection = watching_write
    event.listen(db.engine, "before_cursor_execute", watching_statement)
    try:
        yield events
    finally:
        event.remove(db.engine, "before_cursor_execute", watching_statement)
        del db.write_connection


@pytest.mark.parametrize("fresh_manager", [False, True], ids=["owner-from-memory", "owner-from-a-read"])
def test_the_deletes_leave_before_the_write_transaction_starts(db, fresh_manager):
    """From memory (the lane was made active by this manager) or from one committed read (a
    manager that did not, e.g. after a restart): the owner is known before BEGIN IMMEDIATE."""
    mgr, runtime, switches, callers, lane = _world(db)
    if fresh_manager:
        mgr = LaneManager(db, runtime, campus_topology(), clock=mgr.clock)
        assert mgr._owners.owner(lane.id, T0) is None
    with _order_of_deletes_and_writes(mgr, runtime, switches) as events:
        ended = mgr.end(callers["alice"], lane.id, "released")
    assert ended.state == "released" and _committed_state(db, lane.id) == "released"
    assert "write" in events and events.index("deletes") < events.index("write"), events
    assert set(events[events.index("write") :]) == {"write"}  # every switch's deletes came first
    assert _flows_on_switches(switches, lane.id) == 0


@pytest.mark.parametrize("fresh_manager", [False, True], ids=["owner-from-memory", "owner-from-a-read"])
def test_a_researcher_cannot_take_down_someone_elses_lane_early(db, fresh_manager):
    """The attack on the early deletes: Bob guesses Alice's lane id. Nothing reaches a switch."""
    mgr, runtime, switches, callers, lane = _world(db)
    if fresh_manager:
        mgr = LaneManager(db, runtime, campus_topology(), clock=mgr.clock)
    switches.sent.clear()
    with pytest.raises(NotFound):
        mgr.end(callers["bob"], lane.id, "revoked")
    assert switches.sent == [] and _flows_on_switches(switches, lane.id) > 0
    assert _committed_state(db, lane.id) == "active"


def test_an_operator_ends_anyones_lane_with_the_early_deletes(db):
    mgr, runtime, switches, callers, lane = _world(db)
    op = principals(db, ("olga", "operator"))["olga"]
    with _order_of_deletes_and_writes(mgr, runtime, switches) as events:
        ended = mgr.end(op, lane.id, "revoked")
    assert ended.state == "revoked" and events[0] == "deletes" and "write" in events
    assert _flows_on_switches(switches, lane.id) == 0


def test_a_lane_ended_elsewhere_answers_409_and_leaves_the_runtime_free(db):
    """The memory says active, the row says revoked (another process ended it): the deletes that
    went out are what an ended lane wants; the answer comes from the row."""
    from viplanes.errors import Conflict

    mgr, runtime, switches, callers, lane = _world(db)
    other = LaneManager(db, runtime, campus_topology(), clock=mgr.clock)
    op = principals(db, ("olga", "operator"))["olga"]
    other.end(op, lane.id, "revoked")
    assert mgr._owners.owner(lane.id, T0) == callers["alice"].id  # stale hint
    with pytest.raises(Conflict):
        mgr.end(callers["alice"], lane.id, "released")
    assert _committed_state(db, lane.id) == "revoked" and _flows_on_switches(switches, lane.id) == 0
    assert runtime.state.change.acquire(blocking=False)
    runtime.state.change.release()


def test_an_extension_racing_a_release_does_not_leave_the_flows_behind(db):
    """Extend re-sends the lane from its row; a release that commits between that read and the
    send must not be undone by it: the state is read again after the send."""
    mgr, runtime, switches, callers, lane = _world(db)
    other = LaneManager(db, runtime, campus_topology(), clock=mgr.clock)
    activate = runtime.activate
    raced: list[int] = []

    def activate_after_a_release(spec, *args, **kwargs):
        if not raced:  # the release lands between the extension's read and its send
            raced.append(spec.lane_id)
            other.end(callers["alice"], spec.lane_id, "released")
        return activate(spec, *args, **kwargs)

    runtime.activate = activate_after_a_release
    try:
        mgr.extend(callers["alice"], lane.id, 60)
    finally:
        runtime.activate = activate
    assert raced == [lane.id] and _committed_state(db, lane.id) == "released"
    assert _flows_on_switches(switches, lane.id) == 0
