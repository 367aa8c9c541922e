"""A moving lane's messages for its new path, derived from the ones it has on its old path.
Pure (``datapath=None``).

Compiling a lane costs ~1-3 ms (tens of os-ken objects, addresses parsed, zones laid out), so a
re-route that compiled 1,000 lanes again took seconds. Between two paths of the same length a
lane's rules differ only in where they read and send packets: hop ``i`` of the new path gets
hop ``i``'s rules of the old one with its ``in_port`` match and its output ports mapped from the
old hop's ports to the new hop's (and moved to the new hop's switch when that differs). Rules
that map to themselves are the same objects, so ``moves.plan_moves`` skips them at once.

Nothing here trusts the mapping blindly: ``Repath`` compiles the first lane of each kind (source,
protocol, ports, rate, translation) in full and derives the rest only when the derivation of that
first one gives the very same flows (``flowkey``); any difference (a rule that carries a port
elsewhere, a group, a path of another length) means every lane of that kind is compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.fastmatch import PackedMatch
from viplanes.controller.compile.flowkey import KEY_ATTR, flow_key_of
from viplanes.controller.compile.groups import group_key
from viplanes.domain.values import LaneSpec
from viplanes.topologies.paths import Hop

OFMsgs = list[Any]
PortMap = dict[int, int]


class NotDerivable(Exception):
    """This lane's rules cannot be derived by mapping ports (compile it)."""


def _actions(actions: list[Any], ports: PortMap) -> list[Any] | None:
    """The action list with output ports mapped; None when nothing changes."""
    out = []
    changed = False
    for action in actions:
        if isinstance(action, parser.OFPActionOutput) and action.port in ports and ports[action.port] != action.port:
            out.append(parser.OFPActionOutput(ports[action.port], action.max_len))
            changed = True
        elif isinstance(action, (parser.OFPActionGroup,)):
            raise NotDerivable("a group action")
        else:
            out.append(action)
    return out if changed else None


def _flow(msg: Any, ports: PortMap) -> Any:
    match = msg.match
    fields = match.get("in_port") if hasattr(match, "get") else None
    new_match = None
    if fields is not None and fields in ports and ports[fields] != fields:
        if not isinstance(match, PackedMatch):
            raise NotDerivable("an in_port match os-ken built")
        new_match = PackedMatch([(k, ports[fields] if k == "in_port" else v) for k, v in match._fields2])
    new_insts = None
    for i, inst in enumerate(msg.instructions or ()):
        if isinstance(inst, parser.OFPInstructionActions):
            acts = _actions(list(inst.actions or ()), ports)
            if acts is not None:
                new_insts = list(msg.instructions) if new_insts is None else new_insts
                new_insts[i] = parser.OFPInstructionActions(inst.type, acts)
        elif not isinstance(inst, (parser.OFPInstructionMeter, parser.OFPInstructionGotoTable)):
            raise NotDerivable(f"instruction {type(inst).__name__}")
    if new_match is None and new_insts is None:
        return msg
    out = object.__new__(type(msg))  # copy.copy, without its protocol lookups (10,000s of rules)
    out.__dict__.update(msg.__dict__)
    out.__dict__.pop(KEY_ATTR, None)  # its identity changes
    out.__dict__.pop("buf", None)
    out.xid = None
    if new_match is not None:
        out.match = new_match
    if new_insts is not None:
        out.instructions = new_insts
    return out


def derive(old: dict[int, OFMsgs], old_hops: tuple[Hop, ...], new_hops: tuple[Hop, ...]) -> dict[int, OFMsgs]:
    """The lane's messages per dpid on ``new_hops``, from ``old`` (its messages on ``old_hops``).
    Raises NotDerivable when the paths' lengths differ or a rule is of a kind not mapped here."""
    if len(old_hops) != len(new_hops):
        raise NotDerivable("paths of different lengths")
    if set(old) - {h.dpid for h in old_hops}:
        raise NotDerivable("messages off the path")
    out: dict[int, OFMsgs] = {}
    for before, after in zip(old_hops, new_hops, strict=True):
        ports = {before.in_port: after.in_port, before.out_port: after.out_port}
        msgs = old.get(before.dpid, [])
        if any(isinstance(m, parser.OFPGroupMod) for m in msgs):
            raise NotDerivable("a fast-failover group (its backup path is not a port mapping)")
        out[after.dpid] = [m if isinstance(m, parser.OFPMeterMod) else _flow(m, ports) for m in msgs]
    return out


def _key(msg: Any) -> Hashable:
    if isinstance(msg, parser.OFPMeterMod):
        return ("meter", msg.meter_id, msg.command)
    if isinstance(msg, parser.OFPGroupMod):  # a compiled lane with a backup: never equal to a derived one
        return ("group", msg.group_id, group_key(msg.type, msg.buckets))
    return flow_key_of(msg)


def _identity(per_dpid: dict[int, OFMsgs]) -> dict[int, set[Hashable]]:
    out = {dpid: {_key(m) for m in msgs} for dpid, msgs in per_dpid.items()}
    return {d: keys for d, keys in out.items() if keys}


def kind(lane: LaneSpec) -> Hashable:
    """What decides the shape of a lane's rules besides its path (see the module docstring)."""
    return (
        lane.src_ip,
        lane.protocol,
        lane.src_port is None,
        bool(lane.rate_mbps),
        lane.nat_ip is None,
        lane.takeover is not None,
        tuple(":" in net for net in lane.dst_nets),
    )


class Repath:
    """Derive moving lanes' messages, each kind checked once against ``compile_new``."""

    def __init__(self, compile_new: Callable[[LaneSpec], dict[int, OFMsgs] | None]) -> None:
        self.compile_new = compile_new
        self._trusted: dict[Hashable, bool] = {}
        self.derived = 0
        self.compiled = 0

    def messages(
        self,
        lane: LaneSpec,
        old: dict[int, OFMsgs] | None,
        old_hops: tuple[Hop, ...] | None,
        new_hops: tuple[Hop, ...] | None,
    ) -> dict[int, OFMsgs] | None:
        """The lane's messages on its new path (None: it cannot be carried, as ``compile_new``)."""
        if old is None or old_hops is None or new_hops is None:
            return self._compile(lane)
        key = kind(lane)
        trusted = self._trusted.get(key)
        if trusted is False:
            return self._compile(lane)
        try:
            derived = derive(old, old_hops, new_hops)
        except NotDerivable:
            self._trusted[key] = False
            return self._compile(lane)
        if trusted is None:  # the first of its kind: compiled, and the derivation held to it
            compiled = self._compile(lane)
            self._trusted[key] = compiled is not None and _identity(compiled) == _identity(derived)
            return compiled
        self.derived += 1
        return derived

    def _compile(self, lane: LaneSpec) -> dict[int, OFMsgs] | None:
        self.compiled += 1
        return self.compile_new(lane)
