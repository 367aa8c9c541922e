"""Moving lanes to other paths, make before break: the old and the new messages of the lanes
that move in, three rounds of messages out. Pure (``datapath=None``).

A re-route knows what each switch holds for the lanes it moves (their compiled messages over the
old view) and what they need (over the new one), so it sends only the difference, without
reading the switches back. Each flow is placed by its *slot* (table, priority, match): an ADD to
a slot that holds a flow replaces it in place (OpenFlow 1.3), so

1. ``make``: meters the new paths need that were not there, and flows in slots the old paths did
   not use (the new transit hops, the far end's new ``in_port``): nothing a packet meets yet;
2. ``turn``: flows whose slot stays but whose actions change (the hop where the paths part,
   sending out of another port; the border's replies towards the other link; a held lane's
   drop becoming its forward rule): packets take the new path from here on;
3. ``drop``: DELETE_STRICT of the slots only the old paths used, then their meters.

Fast-failover groups (``failover.py``) ride along by id: a new group is made in round 1 (before
any flow sends to it), a changed one is modified at the start of round 2 (in place: a delete
would take its flows with it), and one only the old paths had is deleted after round 3's flows.

Each round goes to every switch at once with one barrier each, and the next starts when all
have confirmed, so no switch turns a lane before every hop after it has the lane's new flows.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.flowkey import action_key, instructions_key, match_key
from viplanes.controller.compile.groups import group_changes
from viplanes.controller.compile.removal import compile_flow_delete

OFMsgs = list[Any]


@dataclass(frozen=True)
class Moves:
    """The three rounds, each dpid -> ofmsgs (no empty lists)."""

    make: dict[int, OFMsgs] = field(default_factory=dict)
    turn: dict[int, OFMsgs] = field(default_factory=dict)
    drop: dict[int, OFMsgs] = field(default_factory=dict)

    def rounds(self) -> list[dict[int, OFMsgs]]:
        """The non-empty rounds, in the order they must be sent."""
        return [r for r in (self.make, self.turn, self.drop) if r]

    def count(self) -> int:
        return sum(len(msgs) for r in (self.make, self.turn, self.drop) for msgs in r.values())


def slot(msg: Any) -> Hashable:
    """Where a flow sits on a switch: table, priority and match (an ADD there replaces it).
    Our compiled matches keep os-ken's canonical (field, value) list; anything else is keyed
    by ``flowkey.match_key``."""
    fields = getattr(msg.match, "_fields2", None)
    if isinstance(fields, list):
        try:
            key: Hashable = tuple(fields)
            hash(key)
        except TypeError:
            key = match_key(msg.match)
    else:
        key = match_key(msg.match)
    return (msg.table_id, msg.priority, key)


def _same_flow(a: Any, b: Any) -> bool:
    """Both messages install the same flow (timeouts aside: the switch's own runs on). May
    answer False for an equal flow whose instructions are listed in another order (it is then
    sent again: harmless), never True for different ones."""
    if a is b:
        return True
    if a.cookie != b.cookie or a.flags != b.flags:
        return False
    x, y = a.instructions or [], b.instructions or []
    if x is y:
        return True
    if len(x) != len(y):
        return bool(instructions_key(x) == instructions_key(y))
    return all(_same_instruction(i, j) for i, j in zip(x, y, strict=True))


def _same_instruction(i: Any, j: Any) -> bool:
    """Mostly the same objects (a moved rule keeps what its move did not change)."""
    if i is j:
        return True
    if isinstance(i, parser.OFPInstructionActions) and isinstance(j, parser.OFPInstructionActions):
        p, q = i.actions or [], j.actions or []
        return (
            i.type == j.type
            and len(p) == len(q)
            and all(u is v or action_key(u) == action_key(v) for u, v in zip(p, q, strict=True))
        )
    return bool(instructions_key([i]) == instructions_key([j]))


def _split(msgs: Iterable[Any]) -> tuple[dict[Hashable, Any], dict[int, Any], dict[int, Any]]:
    flows: dict[Hashable, Any] = {}
    meters: dict[int, Any] = {}
    groups: dict[int, Any] = {}
    for msg in msgs:
        if isinstance(msg, parser.OFPFlowMod):
            flows[slot(msg)] = msg
        elif isinstance(msg, parser.OFPMeterMod):
            meters[msg.meter_id] = msg
        elif isinstance(msg, parser.OFPGroupMod):
            groups[msg.group_id] = msg
    return flows, meters, groups


def plan_moves(old: Mapping[int, Iterable[Any]], new: Mapping[int, Iterable[Any]]) -> Moves:
    """The rounds that take the switches from ``old`` to ``new`` (per dpid: the FlowMod ADDs and
    MeterMod and GroupMod ADDs of the lanes that move, as compiled over each view). Flows,
    meters and groups equal in both are not sent."""
    moves = Moves()
    for dpid in sorted(set(old) | set(new)):
        old_flows, old_meters, old_groups = _split(old.get(dpid, ()))
        new_flows, new_meters, new_groups = _split(new.get(dpid, ()))
        groups = group_changes(new_groups, old_groups)
        make = [m for mid, m in sorted(new_meters.items()) if mid not in old_meters] + list(groups.adds)
        turn: OFMsgs = list(groups.modifies)
        for key, msg in new_flows.items():
            before = old_flows.get(key)
            if before is None:
                make.append(msg)
            elif not _same_flow(before, msg):
                turn.append(msg)
        drop = [compile_flow_delete(msg) for key, msg in old_flows.items() if key not in new_flows]
        drop += [
            parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=mid)
            for mid in sorted(old_meters)
            if mid not in new_meters
        ]
        drop += groups.deletes
        for rnd, msgs in ((moves.make, make), (moves.turn, turn), (moves.drop, drop)):
            if msgs:
                rnd[dpid] = msgs
    return moves
