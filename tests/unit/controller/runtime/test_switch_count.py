"""Cost per switch count (issue 13): work a lane or a restart does must not grow with switches
the lane does not cross. Synthetic campuses from ``bench.harness.synth_campus`` (every lane crosses 5
switches), fake switches (``fake_switches``), counting doubles."""

from __future__ import annotations

from typing import Any

import pytest

from bench.harness.synth_campus import PATH_SWITCHES
from tests.support.clock import FakeClock
from tests.support.switch_cost import (
    calls_during,
    lane,
    reconciled_runtime,
    restarted,
    synth,
)
from viplanes.controller.compile import base as guardflows
from viplanes.domain.values import LaneSpec


def base_compiles(monkeypatch) -> list[int]:
    """The dpids whose base flows get compiled from now on, in order."""
    compiled: list[int] = []
    real = guardflows.base_flows
    monkeypatch.setattr(guardflows, "base_flows", lambda t, sw: compiled.append(sw.dpid) or real(t, sw))
    return compiled


def test_a_restart_reads_the_lanes_once_and_touches_no_flow(monkeypatch):
    topo = synth(8)
    lanes = [lane(i, i % 8, FakeClock()()) for i in range(1, 41)]
    runtime, switches, source = restarted(topo, lanes)
    compiled = base_compiles(monkeypatch)
    for dpid in sorted(switches.net.tables):  # every switch reconnects, one after the other
        runtime.switch_up(dpid)
    assert len(runtime.reconciled) == len(topo.switches) == 13
    assert source.reads == 1  # not one read per switch
    assert all(plan.empty for plan in runtime.reconciled.values())  # no flow touched
    assert switches.sent_types().count("OFPFlowMod") == 0
    assert set(runtime.lanes) == {ln.lane_id for ln in lanes}
    for dpid in sorted(switches.net.tables):  # a second round: base flows are not compiled again
        runtime.reconcile_switch(dpid)
    assert sorted(compiled) == sorted(sw.dpid for sw in topo.switches)


def test_warm_up_compiles_every_switchs_base_flows_before_the_switches_reconnect(monkeypatch):
    """After a restart the reconciles only read back and compare: the base flows (host guards:
    hundreds per access switch) and their identities are ready before the listener opens."""
    topo = synth(8)
    lanes = [lane(i, i % 8, FakeClock()()) for i in range(1, 41)]
    runtime, switches, _source = restarted(topo, lanes)
    compiled = base_compiles(monkeypatch)
    runtime.warm_up()
    assert sorted(compiled) == sorted(sw.dpid for sw in topo.switches)
    keyed = [m for sw in topo.switches for m in runtime.state.flows.base(sw.dpid) if type(m).__name__ == "OFPFlowMod"]
    assert keyed and all("_vl_flow_key" in vars(m) for m in keyed)
    for dpid in sorted(switches.net.tables):
        runtime.switch_up(dpid)
    assert len(compiled) == len(topo.switches)  # none compiled again by a reconcile
    assert all(plan.empty for plan in runtime.reconciled.values())


def test_warm_up_compiles_with_the_cyclic_gc_held_and_gives_it_back(monkeypatch):
    import gc

    from viplanes.controller.compile.desired import DesiredFlows

    topo = synth(4)
    lanes = [lane(i, i % 4, FakeClock()()) for i in range(1, 9)]
    runtime, _switches, _source = restarted(topo, lanes)
    runtime.state.flows = DesiredFlows(topo)  # nothing compiled yet, as in a fresh process
    seen: list[bool] = []
    real_lane, real_base = DesiredFlows.lane, DesiredFlows.base
    monkeypatch.setattr(DesiredFlows, "lane", lambda self, *a: seen.append(gc.isenabled()) or real_lane(self, *a))
    monkeypatch.setattr(DesiredFlows, "base", lambda self, *a: seen.append(gc.isenabled()) or real_base(self, *a))
    assert gc.isenabled()
    runtime.warm_up()
    assert seen and not any(seen)  # held for every lane and every switch's base flows
    assert gc.isenabled()


def test_a_lane_changed_since_the_read_makes_the_next_reconcile_read_again():
    topo = synth(4)
    lanes = [lane(1, 0, FakeClock()())]
    runtime, switches, source = restarted(topo, lanes)
    for dpid in sorted(switches.net.tables):
        runtime.switch_up(dpid)
    assert source.reads == 1
    extra = lane(2, 1, FakeClock()())
    lanes.append(extra)
    assert runtime.activate(extra).ok
    runtime.reconcile_switch(sorted(switches.net.tables)[0])
    assert source.reads == 2  # the read before the activation is not reused
    runtime.forget_lane_read()  # an operator's drift check reads the database itself
    runtime.reconcile_switch(sorted(switches.net.tables)[0])
    assert source.reads == 3


def test_a_failed_read_is_not_reused_and_keeps_the_switch_as_it_is():
    topo = synth(4)
    runtime, switches, source = restarted(topo, [lane(1, 0, FakeClock()())])

    def broken() -> list[LaneSpec]:
        raise RuntimeError("database away")

    runtime.attach_source(broken)
    dpid = sorted(switches.net.tables)[0]
    runtime.connected.add(dpid)
    assert runtime.reconcile_switch(dpid) is None
    runtime.attach_source(source)
    assert runtime.reconcile_switch(dpid) is not None and source.reads == 1


def activation_calls(access: int) -> tuple[int, set[int]]:
    """Calls spent on activating and releasing one lane (after a warm-up lane), and the
    switches it sent anything to."""
    topo = synth(access)
    runtime, switches, clock = reconciled_runtime(topo)
    warm = lane(1, access - 1, clock())
    assert runtime.activate(warm).ok
    runtime.deactivate(warm.lane_id)
    switches.sent.clear()
    probe = lane(2, access - 1, clock())

    def cycle() -> None:
        assert runtime.activate(probe).ok
        runtime.deactivate(probe.lane_id)

    return calls_during(cycle), {dpid for dpid, _ in switches.sent}


@pytest.mark.parametrize("large", [64])
def test_activation_work_does_not_grow_with_switches_off_the_path(large):
    small_calls, small_dpids = activation_calls(4)
    large_calls, large_dpids = activation_calls(large)
    assert len(small_dpids) == len(large_dpids) == PATH_SWITCHES
    # the same lane on a campus with 16x the switches and hosts: the same work (give or take
    # a few calls parsing longer address strings)
    assert large_calls <= small_calls * 1.01, (small_calls, large_calls)


def test_a_drift_round_counts_once_and_keeps_probes_of_switches_off_the_changing_path():
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from viplanes.controller.compile.lane import compile_base, compile_flow_delete

    topo = synth(8)
    runtime, switches, clock = reconciled_runtime(topo)
    far = topo.switch("a7").dpid  # no lane below crosses it
    table = switches.net.tables[far]
    held = len(table.stats(0, 0, clock()))
    table.apply(compile_flow_delete(compile_base(topo)[far][-1]), clock())  # behind our back
    computed = []
    real_expected = runtime.drift.expected_flow_counts
    runtime.drift.expected_flow_counts = lambda now, dpids=None: computed.append(now) or real_expected(now, dpids)
    real_send, lane_ids = runtime.send, iter(range(100, 200))

    def send(dpid: int, ofmsgs: list[Any]) -> bool:  # a lane lands on a0's path at every probe
        if any(isinstance(m, parser.OFPAggregateStatsRequest) for m in ofmsgs):
            assert runtime.activate(lane(next(lane_ids), 0, clock())).ok
        return real_send(dpid, ofmsgs)

    runtime.send = send
    fixed = runtime.check_drift()
    assert fixed == [far]  # its probe counted although lanes changed elsewhere meanwhile
    assert len(table.stats(0, 0, clock())) == held
    # once at the start, then once per switch of the changing path at most (not per switch)
    assert len(computed) <= 1 + PATH_SWITCHES < len(topo.switches)


def test_drift_rounds_probe_a_bounded_number_of_switches_and_reach_them_all(monkeypatch):
    from viplanes.controller.runtime import drift

    monkeypatch.setattr(drift, "PROBES_PER_ROUND", 5)
    runtime, switches, _ = reconciled_runtime(synth(8))  # 13 switches
    rounds = []
    for _ in range(3):
        switches.sent.clear()
        runtime.check_drift()
        rounds.append([d for d, m in switches.sent if type(m).__name__ == "OFPAggregateStatsRequest"])
    assert [len(r) for r in rounds] == [5, 5, 5]
    assert set(rounds[0] + rounds[1] + rounds[2]) == set(switches.net.tables)  # 13 in 3 rounds


def test_a_drift_round_counts_the_base_flows_of_the_switches_it_probes_only(monkeypatch) -> None:
    """A restart of a big campus probes the switches reconciled so far; counting the base flows
    of every switch up front compiled the whole campus's host guards (140 switches: 2.4 s of
    CPU) while the others were still reconnecting."""
    topo = synth(8)
    runtime, switches, clock = reconciled_runtime(topo)
    far = [sw.dpid for sw in topo.switches][-3:]
    for dpid in far:
        runtime.switch_down(dpid)
    runtime.state.flows = type(runtime.state.flows)(topo)  # as after a restart: nothing compiled yet
    runtime.drift._base_counts.clear()
    compiled = base_compiles(monkeypatch)
    assert runtime.check_drift() == []
    probed = sorted(d for d in runtime.connected if d in runtime.reconciled)
    assert sorted(compiled) == probed and not set(far) & set(compiled)


def test_a_restart_reads_back_at_most_reconciles_at_once_switches_together() -> None:
    """Every switch reconnecting at once must not mean every reconcile reading back at once: the
    TLS handshakes of the switches still connecting would starve (OVS drops a connection that is
    not up within ~1 s and retries after its backoff)."""
    import threading
    import time

    from viplanes.controller.runtime.resync import RECONCILES_AT_ONCE

    topo = synth(24)
    runtime, switches, clock = reconciled_runtime(topo)
    real_stats = runtime.wire.flow_stats
    lock = threading.Lock()
    now_in, most = [0], [0]

    def slow_stats(*args: Any, **kwargs: Any) -> Any:
        with lock:
            now_in[0] += 1
            most[0] = max(most[0], now_in[0])
        try:
            time.sleep(0.02)
            return real_stats(*args, **kwargs)
        finally:
            with lock:
                now_in[0] -= 1

    runtime.wire.flow_stats = slow_stats
    threads = [threading.Thread(target=runtime.reconcile_switch, args=(sw.dpid,)) for sw in topo.switches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(topo.switches) > RECONCILES_AT_ONCE and most[0] == RECONCILES_AT_ONCE


def test_one_switchs_build_lists_and_re_times_only_that_switchs_flows():
    """A restart builds each of a lane's 5 switches on its own: building one must not re-time,
    or list, the flows of the lane's other 4 (that was 5x the work per lane)."""
    from viplanes.controller.compile.desired import DesiredFlows

    topo = synth(4)
    now = FakeClock()()
    flows = DesiredFlows(topo)
    one = lane(1, 0, now)
    first, second = flows.dpids_of(one)[:2]
    flows.build([one], now)
    timed = {
        d: [m.hard_timeout for m in msgs if getattr(m, "hard_timeout", 0)] for d, msgs in flows.lane(one, now).items()
    }
    assert timed[first] and timed[second]
    out, carried = flows.build([one], now + 100, first)
    assert set(out) == {first} and list(carried) == [1]
    later = flows.lane(one, now + 100, -1)  # a dpid it does not cross: nothing re-timed
    assert [m.hard_timeout for m in later[first] if getattr(m, "hard_timeout", 0)] == [t - 100 for t in timed[first]]
    assert [m.hard_timeout for m in later[second] if getattr(m, "hard_timeout", 0)] == timed[second]
