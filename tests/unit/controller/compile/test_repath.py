"""A moving lane's rules derived from its old path's equal its rules compiled for the new path,
and the rounds of a move put new flows first, turned flows second, deletes last (issue 42)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import T0
from tests.support.fake_switches import spec
from tests.support.topos import without_fast_failover
from viplanes.controller.compile.flowkey import flow_key_of
from viplanes.controller.compile.lane import compile_lane, lane_hops
from viplanes.controller.compile.moves import plan_moves
from viplanes.controller.compile.repath import NotDerivable, Repath, derive
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

REDUNDANT = Path(__file__).resolve().parents[4] / "topologies" / "campus-redundant.yaml"


def _topo(fast_failover: bool = False) -> Topology:
    """The redundant campus; without groups unless asked (the controller's re-route is what
    derives rules: a lane with a fast-failover group is compiled)."""
    topo = load_topology(REDUNDANT)
    return topo if fast_failover else without_fast_failover(topo)


def _keys(per_dpid: dict[int, list[Any]]) -> dict[int, set[Any]]:
    return {
        d: {("meter", m.meter_id) if isinstance(m, parser.OFPMeterMod) else flow_key_of(m) for m in msgs}
        for d, msgs in per_dpid.items()
        if msgs
    }


LANES = [
    spec(1),
    spec(2, protocol="udp", dst_port=9000),
    spec(3, src_port=40000, rate_mbps=50.0),
    spec(4, dst_port=None, dst_ports=((6000, 6015),)),
    spec(5, src_ip="198.51.100.30", nat_ip=None),  # the DTN: s5 - s6 - s3 becomes s5 - s7 - s3
    spec(6, src_ip="198.51.100.30", nat_ip=None, protocol="udp", dst_port=9001, rate_mbps=10.0),
]


@pytest.mark.parametrize("down", ["s2:3-s3:3", "s5:2-s6:1", "s6:2-s3:6"])
@pytest.mark.parametrize("lane", LANES, ids=lambda ln: f"lane{ln.lane_id}")
def test_derived_rules_equal_the_compiled_ones(lane: LaneSpec, down: str) -> None:
    topo = _topo()
    view = dataclasses.replace(topo, unusable_links=frozenset({down}))
    old_hops, new_hops = lane_hops(lane, topo), lane_hops(lane, view)
    old = compile_lane(lane, topo, T0)
    assert _keys(derive(old, old_hops, new_hops)) == _keys(compile_lane(lane, view, T0))


def test_a_path_of_another_length_is_not_derived() -> None:
    topo = _topo()
    lane = LANES[4]
    hops = lane_hops(lane, topo)
    with pytest.raises(NotDerivable):
        derive(compile_lane(lane, topo, T0), hops, hops[:1] + hops[2:])


def test_the_first_lane_of_a_kind_is_compiled_and_a_wrong_derivation_compiles_them_all() -> None:
    topo = _topo()
    view = dataclasses.replace(topo, unusable_links=frozenset({"s2:3-s3:3"}))
    lanes = [spec(i, dst_port=5200 + i) for i in range(1, 5)]
    old_hops, new_hops = lane_hops(lanes[0], topo), lane_hops(lanes[0], view)

    good = Repath(lambda ln: compile_lane(ln, view, T0))
    for ln in lanes:
        good.messages(ln, compile_lane(ln, topo, T0), old_hops, new_hops)
    assert (good.compiled, good.derived) == (1, 3)

    # a compiler that disagrees with the port mapping (as one with groups would): no derivation
    wrong = Repath(lambda ln: compile_lane(ln, topo, T0))
    for ln in lanes:
        wrong.messages(ln, compile_lane(ln, topo, T0), old_hops, new_hops)
    assert (wrong.compiled, wrong.derived) == (4, 0)


def test_moves_make_new_slots_first_turn_kept_slots_second_and_drop_old_slots_last() -> None:
    topo = _topo()
    view = dataclasses.replace(topo, unusable_links=frozenset({"s2:3-s3:3"}))
    lane = LANES[0]
    moves = plan_moves(compile_lane(lane, topo, T0), compile_lane(lane, view, T0))
    assert set(moves.make) == {2, 3} and set(moves.turn) == {2, 3} and set(moves.drop) == {2, 3}
    assert 1 not in moves.make and 1 not in moves.turn  # the first hop does not change
    ins = {
        d: {m.match.get("in_port") for m in msgs if isinstance(m, parser.OFPFlowMod)} for d, msgs in moves.make.items()
    }
    assert ins == {2: {4}, 3: {5}}  # packets arriving over the other link
    gone = {d: {m.match.get("in_port") for m in msgs} for d, msgs in moves.drop.items()}
    assert gone == {2: {3}, 3: {3}}
    assert all(m.command == ofp.OFPFC_DELETE_STRICT for msgs in moves.drop.values() for m in msgs)
    assert plan_moves(compile_lane(lane, topo, T0), compile_lane(lane, topo, T0)).rounds() == []


def _groups(per_dpid: dict[int, list[Any]]) -> dict[int, list[tuple[int, int]]]:
    return {
        d: [(m.command, m.group_id) for m in msgs if isinstance(m, parser.OFPGroupMod)]
        for d, msgs in per_dpid.items()
        if any(isinstance(m, parser.OFPGroupMod) for m in msgs)
    }


def test_a_lane_with_a_fast_failover_group_is_compiled_not_derived() -> None:
    topo = _topo(fast_failover=True)
    view = dataclasses.replace(topo, unusable_links=frozenset({"s2:3-s3:3"}))
    lane = LANES[0]
    old = compile_lane(lane, topo, T0)
    assert _groups(old), "the redundant campus's parallel links give the desktop's lane a group"
    with pytest.raises(NotDerivable):
        derive(old, lane_hops(lane, topo), lane_hops(lane, view))
    repath = Repath(lambda ln: compile_lane(ln, view, T0))
    lanes = [spec(i, dst_port=5200 + i) for i in range(1, 4)]
    for ln in lanes:
        repath.messages(ln, compile_lane(ln, topo, T0), lane_hops(ln, topo), lane_hops(ln, view))
    assert (repath.compiled, repath.derived) == (3, 0)


def test_moves_carry_groups_made_first_modified_on_the_turn_and_deleted_last() -> None:
    topo = _topo(fast_failover=True)
    lane = LANES[0]
    with_groups = compile_lane(lane, topo, T0)
    plain = compile_lane(lane, _topo(), T0)
    made = plan_moves(plain, with_groups)  # a backup appears: its groups before the flows using them
    assert _groups(made.make) == {d: [(ofp.OFPGC_ADD, gid) for _, gid in g] for d, g in _groups(with_groups).items()}
    assert not _groups(made.turn) and not _groups(made.drop)
    for dpid, msgs in made.make.items():
        kinds = [isinstance(m, parser.OFPGroupMod) for m in msgs if not isinstance(m, parser.OFPMeterMod)]
        assert kinds == sorted(kinds, reverse=True), f"s{dpid}: a flow before its group"
    gone = plan_moves(with_groups, plain)  # the backup gone: the groups go after the flows
    assert {d: {c for c, _ in g} for d, g in _groups(gone.drop).items()} == {
        d: {ofp.OFPGC_DELETE} for d in _groups(with_groups)
    }
    for msgs in gone.drop.values():
        kinds = [isinstance(m, parser.OFPGroupMod) for m in msgs]
        assert kinds == sorted(kinds), "a group deleted before the flows sending to it"
    dpid = min(_groups(with_groups))
    msgs = with_groups[dpid]
    group = next(m for m in msgs if isinstance(m, parser.OFPGroupMod))
    swapped = parser.OFPGroupMod(
        None, command=ofp.OFPGC_ADD, type_=group.type, group_id=group.group_id, buckets=group.buckets[::-1]
    )
    changed = {**with_groups, dpid: [swapped if m is group else m for m in msgs]}
    turned = plan_moves(with_groups, changed)  # other buckets: modified in place, never deleted
    assert _groups(turned.turn) == {dpid: [(ofp.OFPGC_MODIFY, group.group_id)]}
    assert not turned.make and not turned.drop
