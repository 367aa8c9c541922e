"""A comparable identity for a flow, equal for a FlowMod we built and the flow-stats entry OVS
returns for it.

Reconcile uses it to leave identical flows untouched. The two sides differ in representation only:
match fields may come back in another order, MACs in another case, masked values as
``(value, mask)`` with the host bits cleared, empty action lists dropped, and parsed actions carry
extra attributes (``len``, ``field``). Timeouts and counters are not part of the identity.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable, Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.fastmatch import kept_per_field

MAC_FIELDS = frozenset({"eth_src", "eth_dst", "arp_sha", "arp_tha"})
IPV4_FIELDS = frozenset({"ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa"})
IPV6_FIELDS = frozenset({"ipv6_src", "ipv6_dst", "ipv6_nd_target"})
# attributes that say how a message was encoded, not what it does
_ENCODING_ATTRS = frozenset({"len", "type", "field", "length", "_fields2", "experimenter"})


def _scalar(field: str, value: Any) -> Hashable:
    if field in MAC_FIELDS:
        return str(value).lower()
    if field in IPV4_FIELDS:
        return int(ipaddress.IPv4Address(value))
    if field in IPV6_FIELDS:
        return int(ipaddress.IPv6Address(value))
    return value


def _full_mask(field: str) -> int | None:
    if field in MAC_FIELDS:
        return 2**48 - 1
    if field in IPV4_FIELDS:
        return 2**32 - 1
    if field in IPV6_FIELDS:
        return 2**128 - 1
    return None


def _field_value(field: str, value: Any) -> Hashable:
    """One match value in canonical form: masks applied, all-ones masks dropped."""
    if not isinstance(value, tuple):
        return _scalar(field, value)
    raw, mask = value
    if field in MAC_FIELDS:
        v, m = int(str(raw).replace(":", ""), 16), int(str(mask).replace(":", ""), 16)
    elif field in IPV4_FIELDS:
        v, m = int(ipaddress.IPv4Address(raw)), int(ipaddress.IPv4Address(mask))
    elif field in IPV6_FIELDS:
        v, m = int(ipaddress.IPv6Address(raw)), int(ipaddress.IPv6Address(mask))
    else:
        v, m = int(raw), int(mask)
    if m == _full_mask(field):
        return v if field in IPV4_FIELDS | IPV6_FIELDS else _scalar(field, raw)
    return ("masked", v & m, m)


_CANONICAL_MAX = 65536  # (field, value) pairs kept; cleared when full
_canonical: dict[tuple[str, Any], tuple[str, Hashable]] = {}


def canonical_pair(field: Any, value: Any) -> tuple[str, Hashable]:
    """(field, canonical value), kept per (field, value): a restart keys every desired and every
    read-back flow (tens of thousands), whose fields repeat (addresses parsed by ``ipaddress``
    each time were most of ``match_key``)."""
    return kept_per_field(_canonical, field, value, _pair_of, _CANONICAL_MAX)


def _pair_of(field: Any, value: Any) -> tuple[str, Hashable]:
    return str(field), _field_value(str(field), value)


def match_key(match: Any) -> tuple[tuple[str, Hashable], ...]:
    """Canonical, order-independent form of an OFPMatch (constructed or parsed) or a dict."""
    if match is None:
        return ()
    items = match.items() if hasattr(match, "items") else match
    return tuple(sorted([canonical_pair(f, v) for f, v in items]))


def _attrs(obj: Any) -> tuple[tuple[str, Hashable], ...]:
    return tuple(
        sorted((k, _hashable(v)) for k, v in vars(obj).items() if k not in _ENCODING_ATTRS and not k.startswith("_"))
    )


def _hashable(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if hasattr(value, "__dict__"):
        return (type(value).__name__, _attrs(value))
    return value


def action_key(action: Any) -> Hashable:
    name = type(action).__name__
    if name == "OFPActionOutput":
        # max_len only means something for packets sent to the controller
        max_len = action.max_len if action.port == ofp.OFPP_CONTROLLER else None
        return ("output", action.port, max_len)
    if isinstance(action, parser.OFPActionSetField):  # fastmatch.PackedSetField too
        return ("set_field", action.key, _scalar(action.key, action.value))
    if name == "NXActionCT":  # conntrack: zone immediate, nested nat / set_field(ct_mark)
        return (
            "ct",
            action.flags,
            action.zone_src or "",
            action.zone_ofs_nbits,
            action.recirc_table,
            action.alg,
            tuple(action_key(a) for a in action.actions),
        )
    if name == "NXActionNAT":  # a single-address range may come back with max == min or unset
        low = action.range_ipv4_min or ""
        return (
            "nat",
            action.flags,
            low,
            action.range_ipv4_max or low,
            action.range_proto_min,
            action.range_proto_max or action.range_proto_min,
        )
    return (name, _attrs(action))


def instructions_key(instructions: Iterable[Any] | None) -> tuple[Hashable, ...]:
    out: list[Hashable] = []
    for inst in instructions or ():
        name = type(inst).__name__
        if name == "OFPInstructionActions":
            actions = tuple(action_key(a) for a in inst.actions or ())
            if not actions and inst.type == ofp.OFPIT_APPLY_ACTIONS:
                continue  # "apply nothing" is how a switch may echo a drop
            out.append(("actions", inst.type, actions))
        elif name == "OFPInstructionMeter":
            out.append(("meter", inst.meter_id))
        elif name == "OFPInstructionGotoTable":
            out.append(("goto", inst.table_id))
        else:
            out.append((name, _attrs(inst)))
    # OF1.3 executes instructions in a fixed order whatever the list order. A flow carries each
    # instruction type at most once, so (kind, type) orders them; repr (slow: it printed every
    # action of every flow at a restart) only breaks a tie that a well-formed flow never has.
    if len(out) < 2:
        return tuple(out)
    kinds = [_instruction_order(item) for item in out]
    if len(set(kinds)) < len(kinds):
        return tuple(sorted(out, key=repr))
    return tuple(item for _, item in sorted(zip(kinds, out, strict=True), key=lambda pair: pair[0]))


def _instruction_order(item: Any) -> tuple[str, int]:
    kind = item[0]
    return kind, item[1] if kind == "actions" else 0


def flow_key(priority: int, cookie: int, match: Any, instructions: Iterable[Any] | None, table_id: int = 0) -> Hashable:
    """Identity of a flow: equal for a desired FlowMod and the stats entry of the same flow."""
    return (table_id, priority, cookie, match_key(match), instructions_key(instructions))


def flow_key_of(msg: Any) -> Hashable:
    """flow_key of an OFPFlowMod or OFPFlowStats (both carry the same attributes)."""
    return flow_key(msg.priority, msg.cookie, msg.match, msg.instructions, msg.table_id)


KEY_ATTR = "_vl_flow_key"


def cached_key(msg: Any) -> Any:
    """flow_key_of, remembered on the message: compiled lanes are reused across reconciles and
    their identity never changes (only hard timeouts are re-timed). Flow-stats entries decoded
    from the wire (``flowstats``) come with it."""
    key = msg.__dict__.get(KEY_ATTR)
    if key is None:
        key = msg.__dict__[KEY_ATTR] = flow_key_of(msg)
    return key
