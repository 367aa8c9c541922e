"""The drift check against fake switches: flows deleted behind the controller's back and changes
that were never confirmed are put right at the next check; normal expiry and a miscount never
make it reconcile in a loop."""

from __future__ import annotations

import threading

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime, lane_flows, spec
from viplanes.controller.compile.cookies import EXACT_MASK, lane_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology


@pytest.fixture
def carried(topo: Topology, clock: FakeClock, switches: FakeSwitches) -> tuple[LaneRuntime, list[LaneSpec]]:
    """A runtime with base flows and two active lanes that the source (database) also lists."""
    lanes = [spec(1, now=clock.now), spec(2, dst_port=5202, now=clock.now)]
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    rt.attach_source(lambda: list(lanes))
    for lane in lanes:
        assert rt.activate(lane).ok
    return rt, lanes


def delete_behind_back(switches: FakeSwitches, dpid: int, lane_id: int) -> None:
    switches.net.tables[dpid].apply(
        parser.OFPFlowMod(
            None,
            command=ofp.OFPFC_DELETE,
            table_id=ofp.OFPTT_ALL,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
            cookie=lane_cookie(lane_id),
            cookie_mask=EXACT_MASK,
            match=parser.OFPMatch(),
        )
    )


def test_counts_agree_with_the_switches_so_nothing_is_reconciled(carried) -> None:
    rt, _ = carried
    for dpid, (lo, hi) in rt.expected_flow_counts(rt.clock()).items():
        assert lo == hi == rt.flow_count(dpid), dpid
    assert rt.check_drift() == [] and rt.check_drift() == []
    assert rt.drift_reconciles == 0


def test_flows_deleted_behind_the_controllers_back_come_back_at_the_next_check(carried, switches) -> None:
    rt, _ = carried
    delete_behind_back(switches, 2, 1)
    assert lane_flows(switches, 2, 1) == []
    assert rt.check_drift() == [2]
    assert len(lane_flows(switches, 2, 1)) == 2
    assert rt.check_drift() == []


def test_a_removal_the_switch_never_confirmed_is_reconciled_once_it_answers(carried, switches) -> None:
    rt, lanes = carried
    del lanes[0]  # released in the database first, as the lane manager does
    switches.mute.add(3)  # s3 applies but never answers the barrier...
    switches.refuse = lambda dpid, msg: dpid == 3 and isinstance(msg, parser.OFPFlowMod)  # ...nor the delete
    rt.deactivate(1, timeout_s=0.05)
    assert lane_flows(switches, 3, 1) != []  # still carried on s3
    switches.mute.clear()
    switches.refuse = lambda dpid, msg: False
    assert rt.check_drift() == [3]
    assert lane_flows(switches, 3, 1) == [] and lane_flows(switches, 3, 2) != []


def test_a_lane_expiring_on_the_switch_causes_no_reconcile(topo, clock, switches) -> None:
    lane = spec(1, expires_in=20, now=clock.now)
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    rt.attach_source(lambda: [lane])  # the database still lists it until the scheduler marks it
    assert rt.activate(lane).ok
    for step in range(12):  # through its end and well past it: flows leave by hard timeout
        clock.now += 3
        for table in switches.net.tables.values():
            table.expire(clock.now)
        assert rt.check_drift() == [], step
    assert rt.drift_reconciles == 0 and lane_flows(switches, 1, 1) == []


def test_a_miscount_is_muted_instead_of_reconciled_in_a_loop(carried, switches) -> None:
    rt, lanes = carried
    rt.attach_source(lambda: lanes[1:])  # lane 1 is still carried by the runtime, not the database
    delete_behind_back(switches, 1, 1)
    for _ in range(5):
        rt.check_drift()
    assert rt.drift_reconciles <= 2  # the repair, then one reconcile that finds nothing to do
    before = rt.drift_reconciles
    rt.check_drift()
    assert rt.drift_reconciles == before


def test_a_probe_that_races_a_change_compares_nothing(carried, switches) -> None:
    rt, _ = carried
    delete_behind_back(switches, 1, 2)
    with rt.state.change:  # an activation is being applied on another thread: no count this round
        done: list = []
        worker = threading.Thread(target=lambda: done.append(rt.check_drift()))
        worker.start()
        worker.join(5)
    assert done == [[]]
    assert rt.check_drift() == [1]


def test_a_switch_that_keeps_disagreeing_is_reconciled_with_growing_pauses(carried, switches, monkeypatch) -> None:
    import viplanes.controller.runtime.drift as drift

    now = [100.0]
    monkeypatch.setattr(drift.time, "monotonic", lambda: now[0])
    rt, _ = carried
    switches.refuse = lambda dpid, msg: dpid == 2 and isinstance(msg, parser.OFPFlowMod)
    delete_behind_back(switches, 2, 1)  # and s2 refuses to take them back
    rounds = []
    for _ in range(40):  # 80 s of rounds every 2 s
        rounds.append(bool(rt.check_drift()))
        now[0] += drift.DRIFT_PERIOD_S
    assert 4 <= sum(rounds) <= 8, rounds  # 2, 4, 8, 16, 32, 60 s apart: not 40 reconciles
    switches.refuse = lambda dpid, msg: False
    for _ in range(35):
        rt.check_drift()
        now[0] += drift.DRIFT_PERIOD_S
    assert len(lane_flows(switches, 2, 1)) == 2  # fixed once the switch takes flows again


def test_flows_deleted_twice_are_restored_twice(carried, switches) -> None:
    """The reconcile re-sends the cached desired FlowMods: a second repair of the same flows
    must not trip over the xid the first one gave them."""
    rt, _ = carried
    for _ in range(3):
        delete_behind_back(switches, 2, 1)
        assert rt.reconcile_switch(2) is not None
        assert len(lane_flows(switches, 2, 1)) == 2


def test_a_switch_whose_reconcile_failed_is_retried_until_it_is_ready(topo, clock, switches) -> None:
    """A failed first reconcile (the database did not answer, the switch sent no flow stats in
    time) left the switch connected but never ready, and every lane through it ``installing``
    until the periodic round minutes later. The drift round retries it."""
    lanes = [spec(1, now=clock.now)]
    failing = {"reads": 1, "stats": {3}}

    def source() -> list[LaneSpec]:
        if failing["reads"]:
            failing["reads"] -= 1
            raise RuntimeError("database away")
        return list(lanes)

    rt = inline_runtime(topo, clock, switches)
    rt.attach_source(source)
    real_stats = rt.wire.flow_stats

    def stats(dpid: int, *args: object, **kwargs: object) -> object:
        if dpid in failing["stats"]:
            failing["stats"].discard(dpid)
            return None  # no answer within the timeout
        return real_stats(dpid, *args, **kwargs)

    rt.wire.flow_stats = stats  # type: ignore[method-assign]
    assert rt.reconcile_switch(1) is None  # the read failed
    for dpid in sorted(switches.net.tables)[1:]:
        rt.reconcile_switch(dpid)
    assert 1 not in rt.reconciled and 3 not in rt.reconciled  # s3: no flow stats
    assert set(rt.unready(lanes[0])) >= {rt.switch_name(1), rt.switch_name(3)}
    fixed = rt.check_drift()
    assert {1, 3} <= set(fixed) and rt.unready(lanes[0]) == []
    assert len(lane_flows(switches, 3, 1)) > 0  # the lane the database lists is on the switch


def test_a_disconnected_switch_is_not_retried(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    rt.attach_source(lambda: (_ for _ in ()).throw(RuntimeError("database away")))
    assert rt.reconcile_switch(2) is None
    rt.connected.discard(2)
    rt.attach_source(lambda: [])
    assert 2 not in rt.check_drift() and 2 not in rt.reconciled
