"""reconcile.plan_switch through the flow-table simulator: after applying a plan the switch holds
exactly the desired app flows, identical flows are never touched, other apps' flows survive."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import FlowTable
from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.compile.flowkey import flow_key_of
from viplanes.controller.compile.lane import compile_desired, compile_lane, lane_cookie
from viplanes.controller.compile.reconcile import REFRESH_MARGIN_S, default_forwarding, plan_switch, stale_lanes
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

NOW = 2_000_000.0
CLOUD = "203.0.113.10"


def lane(
    lane_id: int,
    src: str = "10.1.0.10",
    port: int = 5201,
    expires_in: float = 3600,
    rate: float | None = None,
    now: float = NOW,
) -> LaneSpec:
    nat = None if not src.startswith("10.") else f"198.51.100.{193 + lane_id % 31}"
    return LaneSpec(lane_id, src, CLOUD, "tcp", port, None, nat, now + expires_in, rate)


def app_stats(table: FlowTable, now: float = NOW) -> list:
    return table.stats(*ALL_APP_FLOWS, now=now)


def keys(table: FlowTable) -> set:
    return {flow_key_of(s) for s in app_stats(table)}


def desired_keys(msgs: list) -> set:
    return {flow_key_of(m) for m in msgs if isinstance(m, parser.OFPFlowMod)}


def foreign_flow() -> parser.OFPFlowMod:
    """A flow of another app (cookie outside our range): reconcile must never see or touch it."""
    return parser.OFPFlowMod(None, cookie=0x1234, priority=5, match=parser.OFPMatch(in_port=9), instructions=[])


def test_empty_switch_gets_everything_then_nothing(topo: Topology) -> None:
    desired, _ = compile_desired(topo, [lane(1), lane(2, "10.1.0.20", 6000)], NOW)
    table = FlowTable()
    plan = plan_switch(desired[2], app_stats(table), NOW)
    assert not plan.deletes and plan.kept == 0 and len(plan.adds) == len(desired[2])
    table.apply_all(plan.ofmsgs, NOW)
    assert keys(table) == desired_keys(desired[2])
    again = plan_switch(desired[2], app_stats(table), NOW + 10)
    assert again.empty and again.kept == len(desired[2])


def test_identical_flows_keep_their_counters_and_age(topo: Topology) -> None:
    desired, _ = compile_desired(topo, [lane(1)], NOW)
    table = FlowTable()
    table.apply_all(desired[1], NOW)
    table.flows[0].packet_count = 42
    plan = plan_switch(compile_desired(topo, [lane(1)], NOW + 60)[0][1], app_stats(table, NOW + 60), NOW + 60)
    assert plan.empty
    assert table.flows[0].packet_count == 42 and table.flows[0].installed_at == NOW


def test_stale_lane_and_changed_flow_are_replaced_foreign_flow_survives(topo: Topology) -> None:
    table = FlowTable()
    table.apply(foreign_flow(), NOW)
    old, _ = compile_desired(topo, [lane(1), lane(3, port=7000)], NOW)
    table.apply_all(old[3], NOW)  # the border: NAT lives there
    # lane 1 now wants another NAT address: its border flows change
    changed = LaneSpec(1, "10.1.0.10", CLOUD, "tcp", 5201, None, "198.51.100.222", NOW + 3600)
    new, _ = compile_desired(topo, [changed], NOW)
    plan = plan_switch(new[3], app_stats(table), NOW)
    assert stale_lanes(plan) == {1, 3}
    assert all(d.command == ofp.OFPFC_DELETE_STRICT for d in plan.deletes)
    assert plan.ofmsgs[: len(plan.deletes)] == list(plan.deletes)  # deletes go first
    table.apply_all(plan.ofmsgs, NOW)
    assert keys(table) == desired_keys(new[3])
    assert any(e.cookie == 0x1234 for e in table.flows)
    assert not [e for e in table.flows if e.cookie == lane_cookie(3)]


def test_meter_sent_only_with_the_flows_that_need_it(topo: Topology) -> None:
    capped = lane(4, rate=50.0)
    desired, _ = compile_desired(topo, [capped], NOW)
    table = FlowTable()
    plan = plan_switch(desired[1], app_stats(table), NOW)
    assert [m.meter_id for m in plan.meters] == [4]
    table.apply_all(plan.ofmsgs, NOW)  # the simulator refuses a flow whose meter is missing
    again = plan_switch(desired[1], app_stats(table), NOW)
    assert again.empty and not again.meters


def test_stale_capped_lane_takes_its_meter_along(topo: Topology) -> None:
    table = FlowTable()
    desired, _ = compile_desired(topo, [lane(4, rate=50.0), lane(5, "10.1.0.20", 6000)], NOW)
    table.apply_all(desired[1], NOW)
    assert set(table.meters) == {4}
    now_desired, _ = compile_desired(topo, [lane(5, "10.1.0.20", 6000)], NOW)
    plan = plan_switch(now_desired[1], app_stats(table), NOW)
    assert [(m.command, m.meter_id) for m in plan.meters] == [(ofp.OFPMC_DELETE, 4)]
    table.apply_all(plan.ofmsgs, NOW)
    assert table.meters == {} and keys(table) == desired_keys(now_desired[1])


def test_a_stale_flow_whose_meter_a_wanted_flow_uses_leaves_the_meter(topo: Topology) -> None:
    """A capped lane whose flows changed (here: its destination port) keeps its meter while the
    old flows go: the meter is only deleted when no wanted flow still points at it."""
    table = FlowTable()
    before, _ = compile_desired(topo, [lane(4, port=5201, rate=50.0)], NOW)
    table.apply_all(before[1], NOW)
    after, _ = compile_desired(topo, [lane(4, port=5202, rate=50.0)], NOW)
    plan = plan_switch(after[1], app_stats(table), NOW)
    assert plan.deletes and plan.adds
    assert not [m for m in plan.meters if m.command == ofp.OFPMC_DELETE]
    table.apply_all([*plan.deletes, *plan.adds], NOW)  # its ADD of meter 4: "exists", tolerated
    assert set(table.meters) == {4} and keys(table) == desired_keys(after[1])


def test_refresh_before_the_switch_drops_a_long_lane(topo: Topology) -> None:
    long = lane(1, expires_in=500_000)
    table = FlowTable()
    table.apply_all(compile_lane(long, topo, NOW)[1], NOW)
    early = NOW + 1000
    assert plan_switch(compile_lane(long, topo, early)[1], app_stats(table, early), early).empty
    late = NOW + 65535 - REFRESH_MARGIN_S + 10
    plan = plan_switch(compile_lane(long, topo, late)[1], app_stats(table, late), late)
    assert len(plan.refreshes) == 2
    assert {m.command for m in plan.refreshes} == {ofp.OFPFC_MODIFY_STRICT}
    table.apply_all(plan.ofmsgs, late)
    table.expire(NOW + 65535 + 1)
    assert len(table.flows) == 2  # still there after the original deadline
    # the switch still reports the old age; the sender knows it restarted the clock
    later = late + 600
    restarted = {flow_key_of(m): late for m in plan.refreshes}
    assert plan_switch(compile_lane(long, topo, later)[1], app_stats(table, later), later, restarted).empty
    assert plan_switch(
        compile_lane(long, topo, later)[1], app_stats(table, later), later
    ).refreshes  # without that knowledge it would refresh again


def test_last_refresh_is_exact(topo: Topology) -> None:
    """A lane ending within 65535 s gets a re-ADD with its exact remaining lifetime."""
    ln = lane(1, expires_in=70_000)
    table = FlowTable()
    table.apply_all(compile_lane(ln, topo, NOW)[1], NOW)
    table.flows[0].packet_count = 7
    t = NOW + 65535 - 100
    plan = plan_switch(compile_lane(ln, topo, t)[1], app_stats(table, t), t)
    assert {m.command for m in plan.refreshes} == {ofp.OFPFC_ADD}
    assert {m.hard_timeout for m in plan.refreshes} == {70_000 - 65535 + 100}
    table.apply_all(plan.ofmsgs, t)
    assert sorted(e.packet_count for e in table.flows) == [0, 7]  # counters carried over


def test_default_forwarding_is_table_miss_normal() -> None:
    table = FlowTable()
    table.apply(default_forwarding())
    assert table.process({"eth_type": 0x0806}, in_port=3) == [("NORMAL", {"eth_type": 0x0806})]


LANES = st.lists(
    st.builds(
        lambda i, host, port: lane(i, host, port),
        st.integers(1, 30),
        st.sampled_from(["10.1.0.10", "10.1.0.20", "198.51.100.30"]),
        st.integers(1024, 1100),
    ),
    max_size=6,
    unique_by=(lambda ln: ln.lane_id, lambda ln: (ln.src_ip, ln.dst_port)),
)


@given(before=LANES, after=LANES, dpid=st.sampled_from([1, 2, 3, 4]))
@settings(max_examples=150, deadline=None)
def test_any_switch_state_converges_in_one_plan(topo: Topology, before: list, after: list, dpid: int) -> None:
    table = FlowTable()
    table.apply(foreign_flow(), NOW)
    old, _ = compile_desired(topo, before, NOW - 100)
    table.apply_all(old.get(dpid, []), NOW - 100)
    survivors = {id(e) for e in table.flows}
    new, _ = compile_desired(topo, after, NOW)
    plan = plan_switch(new.get(dpid, []), app_stats(table), NOW)
    table.apply_all(plan.ofmsgs, NOW)
    assert keys(table) == desired_keys(new.get(dpid, []))
    assert any(e.cookie == 0x1234 for e in table.flows)
    # nothing that was already right got replaced
    unchanged = desired_keys(old.get(dpid, [])) & desired_keys(new.get(dpid, []))
    kept_ids = {id(e) for e in table.flows if flow_key_of(e.as_stats(NOW)) in unchanged}
    assert kept_ids <= survivors
    assert plan.kept == len(unchanged)
    assert plan_switch(new.get(dpid, []), app_stats(table), NOW).empty


def test_slow_flow_stats_read_does_not_retime_healthy_flows(topo: Topology) -> None:
    """Desired computed at T, stats read 12 s later: the flows lost 12 s, as expected, not time."""
    table = FlowTable()
    table.apply_all(compile_desired(topo, [lane(1, expires_in=600)], NOW)[0][1], NOW)
    desired_at = NOW + 30
    desired = compile_desired(topo, [lane(1, expires_in=600)], desired_at)[0][1]
    read_at = desired_at + 12  # a slow read of a big flow table
    assert not plan_switch(desired, app_stats(table, read_at), read_at, {}, desired_at).refreshes
    # without knowing when desired was computed, the same flows look 12 s short and get re-added
    assert plan_switch(desired, app_stats(table, read_at), read_at).refreshes
