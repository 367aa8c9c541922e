"""Bring one switch's lane groups (fast failover, ``failover.py``) to the desired set. Pure.

Groups carry no cookie: the app's are told by their id (``failover.GROUP_BASE`` and up), so
other groups on the switch are never touched. A group is compared by type and buckets (watched
port and actions); one that differs is modified in place (OFPGC_MODIFY keeps the flows that send
to it, where a delete would take them with it: OpenFlow deletes a group's flows with the group).
Adds and modifies go before the flow adds that use them, deletes after the flow deletes.

A re-sent lane (an extension, a changed spec) may find its groups there, with the buckets of an
older path: OpenFlow 1.3 refuses the ADD (OFPGMFC_GROUP_EXISTS, which the activation tolerates)
and keeps the old buckets. ``add_then_modify`` follows each of its group ADDs with a MODIFY of
the same group in the same batch: whether the ADD made the group or was refused, the MODIFY
(which a switch refuses only for a group that does not exist, OFPGMFC_UNKNOWN_GROUP) leaves the
new buckets in place before the batch's barrier, so the lane is answered installed only once they
are. Reacting to the GROUP_EXISTS error with a MODIFY instead would need a second round trip after
the barrier, and a lane answered installed while its switch still sends over the old buckets.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.failover import GROUP_BASE, lane_of_group
from viplanes.controller.compile.flowkey import action_key


@dataclass(frozen=True)
class GroupPlan:
    first: tuple[Any, ...]  # adds and modifies: before the flows that send to them
    last: tuple[Any, ...]  # deletes: after the flows that sent to them are gone
    kept: int


def group_key(group_type: int, buckets: Iterable[Any]) -> Hashable:
    """Identity of a group: equal for our OFPGroupMod and the switch's OFPGroupDescStats."""
    return (
        group_type,
        tuple(
            (b.watch_port, b.watch_group, tuple(action_key(a) for a in b.actions or ()))
            for b in buckets  # ordered
        ),
    )


def group_delete(group_id: int) -> Any:
    """OFPGC_DELETE of one group (no error when it is not there; its flows go with it)."""
    return parser.OFPGroupMod(None, command=ofp.OFPGC_DELETE, type_=ofp.OFPGT_FF, group_id=group_id, buckets=[])


@dataclass(frozen=True)
class GroupChanges:
    adds: tuple[Any, ...]
    modifies: tuple[Any, ...]
    deletes: tuple[Any, ...]
    kept: int


def group_changes(want: Mapping[int, Any], have: Mapping[int, Any]) -> GroupChanges:
    """Take groups ``have`` (group id -> OFPGroupMod or OFPGroupDescStats) to ``want`` (group id ->
    OFPGroupMod): adds, in-place modifies of those whose type or buckets differ, deletes."""
    adds: list[Any] = []
    modifies: list[Any] = []
    kept = 0
    for gid, msg in sorted(want.items()):
        there = have.get(gid)
        if there is None:
            adds.append(msg)
        elif group_key(there.type, there.buckets) != group_key(msg.type, msg.buckets):
            modifies.append(
                parser.OFPGroupMod(None, command=ofp.OFPGC_MODIFY, type_=msg.type, group_id=gid, buckets=msg.buckets)
            )
        else:
            kept += 1
    deletes = tuple(group_delete(gid) for gid in sorted(have) if gid not in want)
    return GroupChanges(tuple(adds), tuple(modifies), deletes, kept)


def plan_groups(desired: Sequence[Any], actual: Iterable[Any]) -> GroupPlan:
    """``desired``: a switch's desired messages (only its OFPGroupMods count); ``actual``: its
    OFPGroupDescStats (groups outside the app's ids are ignored)."""
    want = {m.group_id: m for m in desired if isinstance(m, parser.OFPGroupMod)}
    have = {g.group_id: g for g in actual if lane_of_group(g.group_id) is not None}
    changes = group_changes(want, have)
    first = tuple(sorted(changes.adds + changes.modifies, key=lambda m: m.group_id))
    return GroupPlan(first=first, last=changes.deletes, kept=changes.kept)


def add_then_modify(per_dpid: Mapping[int, Sequence[Any]]) -> dict[int, list[Any]]:
    """The messages with each group ADD followed by a MODIFY to the same buckets (a group that
    may exist: module docstring); everything else as it was, in order."""
    out: dict[int, list[Any]] = {}
    for dpid, msgs in per_dpid.items():
        listed = out[dpid] = []
        for msg in msgs:
            listed.append(msg)
            if isinstance(msg, parser.OFPGroupMod) and msg.command == ofp.OFPGC_ADD:
                listed.append(
                    parser.OFPGroupMod(
                        None, command=ofp.OFPGC_MODIFY, type_=msg.type, group_id=msg.group_id, buckets=msg.buckets
                    )
                )
    return out


def lane_group_deletes(lane_id: int, dpids: Iterable[int]) -> dict[int, list[Any]]:
    """Per dpid, the delete of the lane's group (the lane ended)."""
    gid = GROUP_BASE + lane_id
    if lane_of_group(gid) is None:
        return {}
    return {dpid: [group_delete(gid)] for dpid in dpids}
