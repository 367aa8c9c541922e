"""OpenFlow 1.3 fast-failover groups for ``flowsim``'s tables, as the specification says (the lab
test, tests/integration/test_link_failover.py, runs them on OVS 3.1): ADD of an existing group
and MODIFY of a missing one are refused, DELETE of a missing group is no error, deleting a
group deletes the flows that send to it, a flow naming a missing group is refused, and a packet
takes the first bucket whose watched port is live (none live: dropped)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser


class GroupSimError(ValueError):
    """A group message the switch refuses: ``code`` is its OFPGMFC_* code."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(what)
        self.code = code


def group_mod(groups: dict[int, Any], msg: Any) -> set[int]:
    """Apply one OFPGroupMod; the group ids whose flows must go (deleted groups)."""
    if msg.command == ofp.OFPGC_ADD:
        if msg.group_id in groups:
            raise GroupSimError(ofp.OFPGMFC_GROUP_EXISTS, f"OFPGMFC_GROUP_EXISTS: group {msg.group_id:#x}")
        _check(msg)
        groups[msg.group_id] = msg
        return set()
    if msg.command == ofp.OFPGC_MODIFY:
        if msg.group_id not in groups:
            raise GroupSimError(ofp.OFPGMFC_UNKNOWN_GROUP, f"OFPGMFC_UNKNOWN_GROUP: group {msg.group_id:#x}")
        _check(msg)
        groups[msg.group_id] = msg
        return set()
    if msg.command == ofp.OFPGC_DELETE:
        ids = set(groups) if msg.group_id == ofp.OFPG_ALL else {msg.group_id} & set(groups)
        for gid in ids:
            del groups[gid]
        return ids
    raise GroupSimError(ofp.OFPGMFC_BAD_COMMAND, f"OFPGMFC_BAD_COMMAND: {msg.command}")


def apply_group_mod(groups: dict[int, Any], flows: list[Any], msg: Any) -> tuple[list[Any], list[Any]]:
    """Apply one OFPGroupMod to a switch's groups: (its flows kept, its flows gone with a group
    deleted, as on OVS)."""
    gone = group_mod(groups, msg)
    dead = [e for e in flows if groups_used(e.instructions) & gone]
    return [e for e in flows if e not in dead], dead


def _check(msg: Any) -> None:
    if msg.type != ofp.OFPGT_FF:
        raise GroupSimError(ofp.OFPGMFC_BAD_TYPE, f"only fast-failover groups are simulated, got type {msg.type}")
    for bucket in msg.buckets:
        if bucket.watch_port in (ofp.OFPP_ANY, 0) and bucket.watch_group == ofp.OFPG_ANY:
            raise GroupSimError(ofp.OFPGMFC_BAD_WATCH, "OFPGMFC_BAD_WATCH: a fast-failover bucket watches nothing")


def groups_used(instructions: Iterable[Any]) -> set[int]:
    """Group ids a flow's apply-actions send to."""
    return {
        a.group_id
        for inst in instructions
        for a in getattr(inst, "actions", ()) or ()
        if isinstance(a, parser.OFPActionGroup)
    }


def live_bucket(group: Any, down_ports: set[int]) -> list[Any]:
    """The actions of the first bucket whose watched port is up; [] when none is."""
    for bucket in group.buckets:
        if bucket.watch_port not in down_ports:
            return list(bucket.actions)
    return []


def expand(actions: Iterable[Any], groups: dict[int, Any], down_ports: set[int]) -> list[Any]:
    """Actions with each group action replaced by its live bucket's (fast failover)."""
    out: list[Any] = []
    for action in actions:
        if isinstance(action, parser.OFPActionGroup):
            out += live_bucket(groups[action.group_id], down_ports)
        else:
            out.append(action)
    return out
