"""LaneRuntime as one shared SwitchState and plain parts (issue 27): one activation path, the
state a change leaves for the drift probe, a switch lost mid-batch, and no state shared between
two runtimes or two listeners through a module."""

from __future__ import annotations

import threading
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime, lane_flows, spec
from tests.support.rawof import of_kind
from viplanes.controller.compile.cookies import lane_id_from_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime


def test_every_part_holds_the_one_state_and_declares_none_of_it(topo) -> None:
    rt = LaneRuntime(topo)
    parts = [rt.wire, rt.changes, rt.resync, rt.drift, rt.ready]
    assert all(part.state is rt.state for part in parts)
    shared = set(vars(rt.state))
    for part in parts:
        assert not shared & set(vars(part)), type(part).__name__
    rt.send = rt.state.send  # the app's and the tests' names still reach the state
    rt.is_master = False
    assert rt.state.is_master is False


def test_one_lane_is_a_batch_of_one(topo) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    """``activate`` sends what ``activate_many([lane])`` sends: one barrier per switch, last."""
    one = inline_runtime(topo, clock, switches)
    assert one.activate(spec(1, now=clock.now)).ok
    sent_one = [(d, type(m).__name__) for d, m in switches.sent]
    other = FakeSwitches(topo, clock)
    many = inline_runtime(topo, clock, other)
    assert many.activate_many([spec(1, now=clock.now)])[1].ok
    assert [(d, type(m).__name__) for d, m in other.sent] == sent_one
    for dpid in {d for d, _ in sent_one}:
        assert switches.sent_types(dpid).count("OFPBarrierRequest") == 1
        assert switches.sent_types(dpid)[-1] == "OFPBarrierRequest"


def test_batched_changes_tell_the_drift_probe_which_switches_moved(topo) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    """A probe in flight compares again when a change lands on its switch (before, only the
    single-lane path said so and a batch left the probe comparing with a moving target)."""
    rt = inline_runtime(topo, clock, switches)
    before = rt.state.applied
    assert rt.activate_many([spec(1, now=clock.now)])[1].ok
    dpids = {d for d, m in switches.sent if isinstance(m, parser.OFPFlowMod)}
    assert dpids and all(rt.state.changed_at.get(d, 0) > before for d in dpids)
    before = rt.state.applied
    assert rt.deactivate_many([1]) is None
    assert all(rt.state.changed_at.get(d, 0) > before for d in dpids)


def test_a_switch_lost_mid_batch_fails_every_lane_on_it_as_disconnected(topo) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    """A switch that refused one lane's message and then went away never confirmed the others:
    none of them counts as installed (before, the refusal made its barrier look answered)."""
    rt = inline_runtime(topo, clock, switches)
    lanes = [spec(1, now=clock.now), spec(2, now=clock.now, dst_port=5202)]
    refused: list[int] = []

    def refuse(dpid: int, msg: Any) -> bool:
        if dpid == 3 and isinstance(msg, parser.OFPFlowMod) and lane_id_from_cookie(msg.cookie) == 1 and not refused:
            refused.append(msg.xid)
            return True
        return False

    switches.refuse = refuse
    switches.mute.add(3)
    threading.Timer(0.1, lambda: rt.switch_down(3)).start()
    results = rt.activate_many(lanes, timeout_s=5.0)
    assert refused
    assert all(not r.ok and "switch s3 (dpid 3) disconnected" in r.reason for r in results.values()), results
    assert all(r.latency_s < 2.0 for r in results.values())
    assert rt.lanes == {} and rt.tracker.outstanding() == 0


def test_a_failed_lane_leaves_nothing_behind_through_the_one_path(topo) -> None:
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches)
    switches.refuse = lambda dpid, msg: (
        dpid == 3 and isinstance(msg, parser.OFPFlowMod) and msg.command == ofp.OFPFC_ADD
    )
    result = rt.activate(spec(1, now=clock.now))
    assert not result.ok and "switch s3 (dpid 3) refused: OFPET_FLOW_MOD_FAILED" in result.reason
    assert all(not lane_flows(switches, d, 1) for d in (1, 2, 3))
    assert rt.state.change.acquire(blocking=False)  # the change lock was given back
    rt.state.change.release()


def test_two_runtimes_share_no_freeze_state_and_no_queued_removals(topo) -> None:
    a, b = LaneRuntime(topo), LaneRuntime(topo)
    a.state.heap.frozen_lanes = 5000
    assert b.state.heap.frozen_lanes is None and b.state.heap is not a.state.heap
    a.queue_removals([7])
    assert b.changes._take_removals() == []
    assert a.changes._take_removals() == [7]


def test_each_listener_owns_its_echo_thread_and_hands_decoded_stats_to_its_runtime() -> None:
    from viplanes.controller.openflow.listener import OpenFlowServer

    heard: list[tuple[int, int]] = []
    one = OpenFlowServer("127.0.0.1", 0, flow_stats_hook=lambda dpid, xid, entries, more: heard.append((dpid, xid)))
    two = OpenFlowServer("127.0.0.1", 0)
    try:
        assert one.echo_sweeper is not two.echo_sweeper
        assert one.flow_stats_hook is not None and two.flow_stats_hook is None
        one.flow_stats_hook(5, 9, [], False)
        assert heard == [(5, 9)]
    finally:
        one.close()
        two.close()


def test_the_handshake_app_routes_decoded_flow_stats_to_the_lane_runtime(topo) -> None:
    from viplanes.controller.openflow.handler import GuardedOFPHandler

    rt = LaneRuntime(topo)
    handler = GuardedOFPHandler(switch_events=rt, of_refusals=rt.refusals)
    assert handler.flow_stats_hook == rt.on_flow_stats
    assert GuardedOFPHandler().flow_stats_hook is None


def test_without_a_topology_activations_fail_and_removals_still_go_out() -> None:
    """One path for both: before, ``activate_many`` raised here and ``deactivate_many`` sent
    nothing while ``deactivate`` removed the lane's cookie from every switch."""
    rt = LaneRuntime(None)
    sent: list[tuple[int, str]] = []

    def send(dpid: int, msgs: list[Any]) -> bool:
        for msg in msgs:
            sent.append((dpid, of_kind(msg)))
            if isinstance(msg, parser.OFPBarrierRequest):
                rt.on_barrier_reply(dpid, msg.xid)
        return True

    rt.send = send
    rt.connected.update({1, 2})
    assert rt.activate(spec(1)).reason == "controller has no topology"
    assert rt.activate_many([spec(2)])[2].reason == "controller has no topology"
    assert sent == []
    rt.deactivate(5)
    assert rt.deactivate_many([6]) is None
    assert sent == [(d, kind) for _ in (5, 6) for d in (1, 2) for kind in ("OFPFlowMod", "OFPBarrierRequest")]
