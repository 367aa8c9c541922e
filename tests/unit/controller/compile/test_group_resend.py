"""A group that may exist (a re-sent lane's): ADD then MODIFY leaves the new buckets whether the
group was there or not, on the OpenFlow 1.3 group simulator; and what a lane compiles to when no
usable path is left (held) or when it has no path at all (an error). Pure."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support import groupsim
from tests.support.paths import TOPOLOGIES
from tests.support.rawof import RawOpenFlow
from viplanes.controller.compile import failover, hold
from viplanes.controller.compile.groups import add_then_modify, group_key
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.paths import NoLanePath

GID = failover.GROUP_BASE + 7
T0 = 1_800_000_000.0


def _apply(groups: dict[int, object], msgs: list[object]) -> list[int]:
    """Apply each message as a switch would, each on its own; the error codes it answered."""
    errors = []
    for msg in msgs:
        try:
            groupsim.group_mod(groups, msg)
        except groupsim.GroupSimError as exc:
            errors.append(exc.code)
    return errors


def _key(group: object) -> object:
    return group_key(group.type, group.buckets)  # type: ignore[attr-defined]


@pytest.mark.parametrize("there", [None, (3, 2)], ids=["absent", "older-buckets"])
def test_add_then_modify_leaves_the_new_buckets_whatever_the_switch_held(there: tuple[int, int] | None) -> None:
    groups: dict[int, object] = {} if there is None else {GID: failover.group_mod(GID, there)}
    new = failover.group_mod(GID, (2, 3))
    flow = parser.OFPFlowMod(None, command=ofp.OFPFC_ADD, match=parser.OFPMatch(in_port=1))
    out = add_then_modify({5: [new, flow]})
    assert [type(m).__name__ for m in out[5]] == ["OFPGroupMod", "OFPGroupMod", "OFPFlowMod"]
    assert [m.command for m in out[5][:2]] == [ofp.OFPGC_ADD, ofp.OFPGC_MODIFY]
    errors = _apply(groups, out[5][:2])
    assert errors == ([] if there is None else [ofp.OFPGMFC_GROUP_EXISTS])  # the ADD's, tolerated
    assert _key(groups[GID]) == _key(new)
    # the ADD alone (before): an existing group keeps its older buckets
    if there is not None:
        before = {GID: failover.group_mod(GID, there)}
        assert _apply(before, [new]) == [ofp.OFPGMFC_GROUP_EXISTS] and _key(before[GID]) != _key(new)


def test_add_then_modify_leaves_other_messages_alone() -> None:
    delete = failover.group_mod(GID, (2, 3), command=ofp.OFPGC_DELETE)
    modify = failover.group_mod(GID, (2, 3), command=ofp.OFPGC_MODIFY)
    assert add_then_modify({1: [delete, modify]}) == {1: [delete, modify]}


def test_compile_or_hold_holds_only_for_want_of_a_usable_link() -> None:
    topo = load_topology(TOPOLOGIES / "campus-redundant.yaml")
    desktop = topo.host("desktop")
    nat = str(topo.lane_addresses()[0])
    lane = LaneSpec(3, str(desktop.iface.ip.ip), "203.0.113.10", "tcp", 5201, None, nat, T0 + 600)
    msgs, why = hold.compile_or_hold(lane, topo, T0)
    assert why is None and len(msgs) > 1
    cut = dataclasses.replace(topo, unusable_links=frozenset({"s2:3-s3:3", "s2:4-s3:5"}))
    msgs, why = hold.compile_or_hold(lane, cut, T0)
    assert why is not None and "s2:3-s3:3" in why and list(msgs) == [1]  # held at its first switch
    assert all(not m.instructions for m in msgs[1])  # dropping: sent nowhere
    stranger = dataclasses.replace(lane, src_ip="10.9.9.9")  # no host of the campus: no lane at all
    with pytest.raises(ValueError):
        hold.compile_or_hold(stranger, cut, T0)
    no_links = dataclasses.replace(topo, links=())
    with pytest.raises(NoLanePath):  # no path over the declared links: no lane, not a held one
        hold.compile_or_hold(lane, no_links, T0)


@pytest.mark.integration
def test_add_then_modify_on_open_vswitch(bridge: tuple[str, RawOpenFlow]) -> None:
    """The same on a real OVS bridge (root, a running ovs-vswitchd): the ADD of an existing group
    is refused with OFPGMFC_GROUP_EXISTS and nothing else, and the group has the new buckets."""
    name, conn = bridge

    def send(msgs: list[object]) -> list[tuple[int, int]]:
        for msg in msgs:
            conn.send(msg)
        return [(e.type, e.code) for e in conn.barrier()]

    def watched() -> list[int]:
        out = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", name],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        return [int(p) for p in re.findall(r"watch_port:(\d+)", out)]

    assert send(add_then_modify({1: [failover.group_mod(GID, (2, 3))]})[1]) == []  # absent: made
    assert watched() == [2, 3]
    errors = send(add_then_modify({1: [failover.group_mod(GID, (3, 4))]})[1])
    assert errors == [(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_GROUP_EXISTS)]  # the ADD's, tolerated
    assert watched() == [3, 4]
