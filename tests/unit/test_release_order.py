"""A release deletes an active lane's flows while its end is committed, not after (issue 13):
the owner is checked first, the answer still waits for the commit and every barrier, and a failed
commit leaves the flows removed (fail closed) with the runtime free for the next change."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.unit.conftest import T0
from tests.unit.fake_switches import Clock, FakeSwitches, inline_runtime
from tests.unit.test_store import db, lane_input, principals, _topo  # noqa: F401  (fixture)
from viplanes import lanes as lanes_module
from viplanes.controller.cookies import EXACT_MASK, lane_cookie
from viplanes.errors import NotFound
from viplanes.lanes import LaneManager
from viplanes.models import Lane


def _world(db):  # noqa: F811 - the fixture
    topo, clock = _topo(), Clock(T0)
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


def _committed_state(db, lane_id: int) -> str:  # noqa: F811 - the fixture
    with db.read() as s:  # another connection: sees only what is committed
        return s.get(Lane, lane_id).state


def test_release_sends_the_deletes_before_the_end_is_committed(db):  # noqa: F811
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


def test_someone_elses_release_touches_no_switch(db):  # noqa: F811
    mgr, runtime, switches, callers, lane = _world(db)
    switches.sent.clear()
    with pytest.raises(NotFound):
        mgr.end(callers["bob"], lane.id, "released")
    assert switches.sent == [] and _flows_on_switches(switches, lane.id) > 0
    assert _committed_state(db, lane.id) == "active"


def test_a_failed_commit_leaves_the_flows_removed_and_the_runtime_usable(db, monkeypatch):  # noqa: F811
    mgr, runtime, switches, callers, lane = _world(db)

    def broken_audit(*_args, **_kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(lanes_module, "add_audit", broken_audit)
    with pytest.raises(RuntimeError):
        mgr.end(callers["alice"], lane.id, "released")
    assert _committed_state(db, lane.id) == "active"  # rolled back...
    assert _flows_on_switches(switches, lane.id) == 0  # ...but the flows are gone: fail closed
    assert runtime._change.acquire(blocking=False)  # the change lock was given back
    runtime._change.release()
    monkeypatch.undo()
    second, _ = mgr.request(callers["alice"], lane_input(port=9001))
    assert second.state == "active" and _flows_on_switches(switches, second.id) > 0
