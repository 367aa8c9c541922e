"""LaneRuntime against fake switches (the simulator's flow tables answering like OVS): activation
confirmed by barriers, failures with reasons, removal, counters, reconcile on connect/restart."""

from __future__ import annotations

import threading
import time

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import CLOUD, NAT_IP, FakeSwitches, inline_runtime, lane_flows, spec
from tests.support.flowsim import ip_packet
from tests.support.rawof import of_kind
from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.compile.lane import lane_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.topologies.model import Topology


@pytest.fixture
def rt(topo: Topology, clock: FakeClock, switches: FakeSwitches) -> LaneRuntime:
    return inline_runtime(topo, clock, switches)


def desktop_to_cloud(topo: Topology, dst_port: int = 5201) -> dict:
    desktop = topo.host("desktop")
    return ip_packet(desktop.iface.mac, topo.middleboxes[0].inside.mac, "10.1.0.10", CLOUD, "tcp", 40000, dst_port)


def test_activate_installs_on_every_path_switch_after_barriers(rt, switches, topo) -> None:
    result = rt.activate(spec())
    assert result.ok, result.reason
    assert result.latency_s >= 0
    for dpid in (1, 2, 3):
        assert len(lane_flows(switches, dpid, 1)) == 2  # forward + reverse
        assert switches.sent_types(dpid)[-1] == "OFPBarrierRequest"
    assert len(lane_flows(switches, 3, 1, table_id=1)) == 2  # established + related replies
    assert lane_flows(switches, 4, 1) == []
    # and the traffic really takes the lane: leaves at the edge with the lane address (through
    # the border's egress table, a base flow the switch got when it connected)
    from viplanes.controller.compile.lane import compile_base

    switches.net.install(compile_base(topo))
    for table in switches.net.tables.values():
        table.apply(
            parser.OFPFlowMod(None, priority=0, match=parser.OFPMatch(), instructions=[])
        )  # no NORMAL fallback: lane or drop
    outs = switches.net.send_from_host("desktop", desktop_to_cloud(topo))
    assert [(o.kind, o.packet["ipv4_src"]) for o in outs] == [("edge", NAT_IP)]
    assert rt.tracker.outstanding() == 0


def test_missing_switch_fails_with_its_name_and_installs_nothing(rt, switches) -> None:
    rt.connected.discard(2)
    result = rt.activate(spec())
    assert not result.ok
    assert result.reason == "switch s2 (dpid 2) not connected"
    assert all(not lane_flows(switches, d, 1) for d in (1, 2, 3))


def test_refused_flow_fails_the_lane_and_removes_what_was_installed(rt, switches) -> None:
    switches.refuse = lambda dpid, msg: (
        dpid == 3 and isinstance(msg, parser.OFPFlowMod) and msg.command == ofp.OFPFC_ADD
    )
    result = rt.activate(spec())
    assert not result.ok
    assert "switch s3 (dpid 3) refused: OFPET_FLOW_MOD_FAILED" in result.reason
    assert all(not lane_flows(switches, d, 1) for d in (1, 2, 3))  # s1, s2 cleaned up
    assert 1 not in rt.lanes


def test_failed_refresh_of_a_carried_lane_keeps_its_flows(rt, switches, clock) -> None:
    assert rt.activate(spec(expires_in=600, now=clock.now)).ok
    switches.mute.add(3)  # the extension's re-send is never confirmed by s3
    result = rt.activate(spec(expires_in=6000, now=clock.now), timeout_s=0.2)
    assert not result.ok and "did not confirm" in result.reason
    assert all(len(lane_flows(switches, d, 1)) == 2 for d in (1, 2, 3))
    assert 1 in rt.lanes


def test_unanswered_barrier_times_out(rt, switches) -> None:
    switches.mute.add(2)
    result = rt.activate(spec(), timeout_s=0.2)
    assert not result.ok
    assert result.reason == "switch s2 (dpid 2) did not confirm within 0.2 s"
    assert 0.2 <= result.latency_s < 2.0


def test_disconnect_while_waiting_fails_promptly(rt, switches) -> None:
    switches.mute.add(3)

    def down_once_waiting() -> None:  # not on a timer: on a busy machine the activation started late
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not any(
            d == 3 and type(m).__name__ == "OFPBarrierRequest" for d, m in list(switches.sent)
        ):
            time.sleep(0.005)
        rt.switch_down(3)

    threading.Thread(target=down_once_waiting, daemon=True).start()
    result = rt.activate(spec(), timeout_s=5.0)
    assert not result.ok
    assert "switch s3 (dpid 3) disconnected" in result.reason
    assert result.latency_s < 2.0


def test_uncompilable_lane_fails_with_the_compilers_reason(rt) -> None:
    result = rt.activate(spec(src_ip="10.9.9.9"))
    assert not result.ok and "10.9.9.9" in result.reason
    result = rt.activate(spec(expires_in=-5))
    assert not result.ok and "expired" in result.reason


def test_deactivate_deletes_by_cookie_and_leaves_other_lanes(rt, switches) -> None:
    assert rt.activate(spec(1)).ok
    assert rt.activate(spec(2, src_ip="10.1.0.20", nat_ip="198.51.100.201")).ok
    rt.deactivate(1)
    assert all(not lane_flows(switches, d, 1) for d in (1, 2, 3))
    assert all(len(lane_flows(switches, d, 2)) == 2 for d in (1, 2, 3))
    assert 1 not in rt.lanes and 2 in rt.lanes


def test_counters_sum_the_two_ingress_rules_only(rt, switches, topo) -> None:
    assert rt.activate(spec()).ok
    for _ in range(3):
        switches.net.send_from_host("desktop", desktop_to_cloud(topo))
    reply = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, NAT_IP, "tcp", 5201, 40000)
    for _ in range(2):
        switches.net.send_from_edge(reply)
    counters = rt.counters(1)
    assert counters is not None
    assert counters.packets == 5  # 3 forward at s1 + 2 reverse at s3, transit not counted twice
    assert counters.bytes == 5 * 1500
    assert rt.counters(99) is None


def test_counters_none_when_a_switch_is_gone(rt) -> None:
    assert rt.activate(spec()).ok
    rt.switch_down(1)
    assert rt.counters(1) is None


def test_switch_connect_reconciles_base_flows_and_desired_lanes(topo, clock, switches) -> None:
    rt = switches.attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()), connect=False)
    rt.attach_source(lambda: [spec(5)])
    for dpid in (1, 2, 3, 4):
        rt.switch_up(dpid)
    plan = rt.reconciled[2]
    assert len(plan.adds) >= 3 and plan.kept == 0 and not plan.deletes
    assert all(len(lane_flows(switches, d, 5)) == 2 for d in (1, 2, 3))
    assert 5 in rt.lanes


def test_restarted_runtime_keeps_identical_flows_and_their_counters(topo, clock, switches) -> None:
    first = inline_runtime(topo, clock, switches)
    assert first.activate(spec(5)).ok
    for dpid in (1, 2, 3, 4):
        first.reconcile_switch(dpid)  # base flows
    switches.net.send_from_host("desktop", desktop_to_cloud(topo))
    before = {id(e): e.packet_count for t in switches.net.tables.values() for e in t.flows}
    clock.now += 30
    second = switches.attach(
        LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()), connect=False
    )  # a new controller process: knows nothing
    second.attach_source(lambda: [spec(5)])
    n_sent = len(switches.sent)
    for dpid in (1, 2, 3, 4):
        second.switch_up(dpid)
    after = {id(e): e.packet_count for t in switches.net.tables.values() for e in t.flows}
    assert after == before  # the very same entries, counters untouched
    sent = [of_kind(m) for _, m in switches.sent[n_sent:]]
    # nothing to change: only reads (the flows, the groups, and the ports' state: ``read_ports``)
    assert set(sent) == {"OFPFlowStatsRequest", "OFPGroupDescStatsRequest", "OFPPortDescStatsRequest"}
    assert second.counters(5).packets == 1


def test_reconcile_deletes_a_lane_no_longer_desired(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    assert rt.activate(spec(5)).ok
    rt.attach_source(lambda: [])
    rt.reconcile_all()
    assert all(not lane_flows(switches, d, 5) for d in (1, 2, 3))
    assert 5 not in rt.lanes


def test_failing_source_never_deletes_lanes(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    assert rt.activate(spec(5)).ok

    def broken() -> list:
        raise RuntimeError("database is down")

    rt.attach_source(broken)
    rt.reconcile_all()
    assert rt.reconcile_switch(1) is None
    assert all(len(lane_flows(switches, d, 5)) == 2 for d in (1, 2, 3))


def test_long_lane_refreshed_before_hard_timeout_keeps_counters_and_age(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    lane = spec(5, expires_in=200_000, now=clock.now)
    rt.attach_source(lambda: [lane])
    assert rt.activate(lane).ok
    assert {e.hard_timeout for e in lane_flows(switches, 1, 5)} == {65535}
    switches.net.send_from_host("desktop", desktop_to_cloud(topo))
    clock.now += 65535 - 600  # 10 minutes before the switch would drop the lane
    rt.reconcile_all()
    mods = [m for _, m in switches.sent if isinstance(m, parser.OFPFlowMod) and m.command == ofp.OFPFC_MODIFY_STRICT]
    assert len(mods) == 10  # every lane flow on s1..s3 (2 in table 1 and 2 in table 3 of s3), base flows untouched
    clock.now += 1200  # past the original deadline
    for table in switches.net.tables.values():
        table.expire(clock.now)
    flows = lane_flows(switches, 1, 5)
    assert len(flows) == 2 and sum(e.packet_count for e in flows) == 1
    n_sent = len(switches.sent)
    clock.now += 300
    rt.reconcile_all()  # just refreshed: nothing to send this round
    assert not [m for _, m in switches.sent[n_sent:] if isinstance(m, parser.OFPFlowMod)]


def test_extended_lane_gets_an_exact_new_deadline(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    assert rt.activate(spec(5, expires_in=600, now=clock.now)).ok
    clock.now += 590
    rt.attach_source(lambda: [spec(5, expires_in=3000, now=clock.now)])
    rt.reconcile_all()
    assert {e.hard_timeout for e in lane_flows(switches, 2, 5)} == {3000}


def test_flow_removed_is_noted_per_lane(rt, clock) -> None:
    rt.on_flow_removed(2, lane_cookie(9), ofp.OFPRR_HARD_TIMEOUT)
    rt.on_flow_removed(2, ALL_APP_FLOWS[0] | (1 << 47), ofp.OFPRR_DELETE)  # base flow: ignored
    assert list(rt.removed) == [(clock.now, 2, 9, ofp.OFPRR_HARD_TIMEOUT)]


def test_unknown_switch_gets_nothing(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    rt.connected.add(77)
    assert rt.reconcile_switch(77) is None


def test_without_topology_only_default_forwarding(clock) -> None:
    sent: list = []
    rt = LaneRuntime(None, clock=clock, spawn=lambda fn: fn())

    def send(dpid: int, ofmsgs: list) -> bool:
        for msg in ofmsgs:
            sent.append(msg)
            if isinstance(msg, parser.OFPFlowStatsRequest):
                rt.on_flow_stats(dpid, msg.xid, [], more=False)
            elif isinstance(msg, parser.OFPBarrierRequest):
                rt.on_barrier_reply(dpid, msg.xid)
        return True

    rt.send = send
    rt.switch_up(0x7E57)
    mods = [m for m in sent if isinstance(m, parser.OFPFlowMod)]
    assert len(mods) == 1 and mods[0].priority == 0
    assert mods[0].instructions[0].actions[0].port == ofp.OFPP_NORMAL
    result = rt.activate(spec())
    assert not result.ok and result.reason == "controller has no topology"


def test_lane_activated_while_a_reconcile_reads_is_left_alone(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    rt.attach_source(lambda: [])  # what the reconcile reads first: no lanes yet
    results: list = []

    def send(dpid: int, ofmsgs: list) -> bool:
        if any(isinstance(m, parser.OFPFlowStatsRequest) for m in ofmsgs) and not results:
            # between reading the desired lanes and reading the switch, a lane is activated
            worker = threading.Thread(target=lambda: results.append(rt.activate(spec(5))))
            worker.start()
            worker.join(5)
            assert not worker.is_alive(), "activation waited for the reconcile's read"
        return switches.send(dpid, ofmsgs)

    rt.send = send
    plan = rt.reconcile_switch(2)
    assert results[0].ok
    assert not plan.deletes
    assert len(lane_flows(switches, 2, 5)) == 2  # not deleted as "stale"
    rt.reconcile_switch(2)  # a later reconcile, with lane 5 still not desired, removes it
    assert lane_flows(switches, 2, 5) == []


def test_periodic_round_keeps_a_lane_activated_while_it_read_the_source(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    calls: list = []

    def source() -> list:
        calls.append(1)
        if len(calls) == 1:  # the database answered "no lanes" just before lane 5 was stored
            worker = threading.Thread(target=lambda: rt.activate(spec(5)))
            worker.start()
            worker.join(5)
            return []
        return [spec(5)]

    rt.attach_source(source)
    rt.reconcile_all()
    assert 5 in rt.lanes  # still answered for (proxy ARP, counters)
    assert all(len(lane_flows(switches, d, 5)) == 2 for d in (1, 2, 3))


def test_switch_reconcile_compiles_only_lanes_crossing_it(topo, clock, switches, monkeypatch) -> None:
    from viplanes.controller.compile import lane as compiler

    compiled: list[int] = []
    real = compiler.compile_lane

    def counting(lane, *args, **kwargs):
        compiled.append(lane.lane_id)
        return real(lane, *args, **kwargs)

    monkeypatch.setattr(compiler, "compile_lane", counting)
    rt = inline_runtime(topo, clock, switches)
    dtn_lane = spec(6, src_ip="198.51.100.30", nat_ip=None)  # the DTN sits on s3: one switch
    rt.attach_source(lambda: [spec(5), dtn_lane])
    rt.reconcile_switch(4)
    assert compiled == []  # no lane crosses s4
    rt.reconcile_switch(2)
    assert compiled == [5]
    rt.reconcile_switch(3)
    assert compiled == [5, 6]
    clock.now += 60
    rt.reconcile_switch(1)
    rt.reconcile_switch(3)
    assert compiled == [5, 6]  # compiled once, re-timed after
    assert {e.hard_timeout for e in lane_flows(switches, 3, 6)} == {3600}
