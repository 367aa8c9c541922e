"""Check every OpenFlow message from a peer before os-ken's parser sees it. Pure: bytes in, verdict out.

Why: anyone who reaches the OpenFlow port can send anything, and os-ken 4.2's parsers trust the
length fields inside a message. They walk TLV lists with ``offset += element.length``, so a length
of 0 never advances and the connection's thread spins forever (checked on os-ken 4.2.2):

- ``OFPHello`` elements (the very first, unauthenticated message) with ``length == 0``;
- flow-stats entries, their instructions, and the actions inside an instruction with length 0;
- inside Nicira actions: ct()'s nested actions (a length of 0 grows a list until memory runs
  out), controller2's properties (a userdata property of length 0 spins);
- other multipart bodies (group buckets, meter bands, queue properties), and the parsers of
  controller-to-switch messages (``OFPFlowMod`` instructions) a peer may send us anyway.

Exceptions from parsers are caught by os-ken (the message is dropped), so the danger is loops, not
crashes. os-ken's read loop itself is safe against a header length below 8 (it skips 8 bytes).
A thread cannot be interrupted from outside, so the only fix is to never start such a loop: this
module walks every length field the parser will walk, using the same arithmetic, and answers

- ``ok``: hand it to the parser;
- ``drop``: a well-framed message we never asked for (experimenter, unrequested multipart types,
  non-1.3 errors during version negotiation): not parsed, the connection stays;
- ``reject``: a length field is below its header size, runs past its container, or the message
  type is one a switch never sends: the connection is closed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from os_ken.ofproto import nicira_ext, ofproto_common
from os_ken.ofproto import ofproto_v1_3 as ofp

OK, DROP, REJECT = "ok", "drop", "reject"
HEADER = ofp.OFP_HEADER_SIZE  # 8
OF13 = ofp.OFP_VERSION  # 4


@dataclass(frozen=True)
class Verdict:
    action: str  # ok | drop | reject
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.action == OK


class Malformed(ValueError):
    """A length field the parser would trust is impossible."""


def _u16(buf: bytes, off: int) -> int:
    return struct.unpack_from("!H", buf, off)[0]


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise Malformed(what)


def _round8(n: int) -> int:
    return (n + 7) // 8 * 8


# ---- building blocks (each returns the offset just past what it checked) ------------------------
def check_match(buf: bytes, off: int, end: int) -> int:
    """An ofp_match (OXM) at ``off`` inside ``[off, end)``; returns the offset after its padding."""
    _need(off + 4 <= end, f"match header at {off} runs past {end}")
    mtype, length = struct.unpack_from("!HH", buf, off)
    _need(mtype == ofp.OFPMT_OXM, f"match type {mtype} is not OXM")
    _need(length >= 4, f"match length {length} < 4")
    _need(off + length <= end, f"match length {length} at {off} runs past {end}")
    pos, stop = off + 4, off + length
    while pos < stop:
        _need(pos + 4 <= stop, f"OXM header at {pos} runs past the match")
        oxm_class, _field, oxm_len = struct.unpack_from("!HBB", buf, pos)
        if oxm_class == 0xFFFF:  # experimenter OXM carries a 4-byte experimenter id
            _need(oxm_len >= 4, f"experimenter OXM length {oxm_len} < 4")
        _need(pos + 4 + oxm_len <= stop, f"OXM at {pos} (length {oxm_len}) runs past the match")
        pos += 4 + oxm_len
    padded = off + _round8(length)
    _need(padded <= end, f"match padding at {off} runs past {end}")
    return padded


def check_actions(buf: bytes, off: int, end: int, depth: int = 0) -> None:
    """A list of actions filling ``[off, end)`` exactly; every length is >= 8 and a multiple of 8,
    and the Nicira actions whose os-ken parsers walk inner lists have sound inner lengths."""
    pos = off
    while pos < end:
        _need(pos + 4 <= end, f"action header at {pos} runs past {end}")
        atype, length = struct.unpack_from("!HH", buf, pos)
        _need(
            length >= ofp.OFP_ACTION_HEADER_SIZE and length % 8 == 0,
            f"action type {atype} length {length} is not a multiple of 8 >= 8",
        )
        _need(pos + length <= end, f"action at {pos} (length {length}) runs past {end}")
        if atype == ofp.OFPAT_SET_FIELD:
            _need(pos + 8 <= pos + length, "set_field too short")
            oxm_len = buf[pos + 7]
            _need(pos + 8 + oxm_len <= pos + length, "set_field OXM runs past its action")
        elif atype == ofp.OFPAT_EXPERIMENTER:
            _check_nicira(buf, pos, pos + length, depth)
        pos += length


# Nicira actions os-ken parses with a loop over inner lengths (os-ken 4.2.2, nx_actions.py):
# ct() holds a list of actions after its 14 fixed bytes (a nested length of 0 never advances:
# the list grows until memory runs out); controller2 holds properties after 6 pad bytes (a
# userdata property of length 0 moves the offset back by as much as it went forward: a spin).
_NX_SUBTYPE_AT = ofp.OFP_ACTION_EXPERIMENTER_HEADER_SIZE  # then the payload os-ken parses
_NX_CT_ACTIONS_AT = _NX_SUBTYPE_AT + 2 + 14
_NX_CONTROLLER2_PROPS_AT = _NX_SUBTYPE_AT + 2 + 6
_NX_MAX_NESTING = 2  # OVS allows nat/set_field inside ct(), and nothing deeper


def _check_nicira(buf: bytes, pos: int, end: int, depth: int) -> None:
    if struct.unpack_from("!I", buf, pos + 4)[0] != ofproto_common.NX_EXPERIMENTER_ID:
        return  # os-ken keeps other experimenters' actions as opaque bytes
    _need(end - pos >= _NX_SUBTYPE_AT + 2, f"Nicira action at {pos} has no subtype")
    subtype = _u16(buf, pos + _NX_SUBTYPE_AT)
    if subtype == nicira_ext.NXAST_CT:
        _need(end - pos >= _NX_CT_ACTIONS_AT, f"ct action at {pos} shorter than its fixed part")
        _need(depth < _NX_MAX_NESTING, f"ct action at {pos} nested {depth + 1} deep")
        check_actions(buf, pos + _NX_CT_ACTIONS_AT, end, depth + 1)
    elif subtype == nicira_ext.NXAST_CONTROLLER2:
        _check_controller2_props(buf, pos + _NX_CONTROLLER2_PROPS_AT, end)


def _check_controller2_props(buf: bytes, pos: int, end: int) -> None:
    """Walk the properties with os-ken's own arithmetic: each advances 4 + its parser's size."""
    while pos < end:
        _need(pos + 4 <= end, f"controller2 property header at {pos} runs past {end}")
        ptype, length = struct.unpack_from("!HH", buf, pos)
        _need(length >= 4, f"controller2 property type {ptype} length {length} < 4")
        size = 4
        if ptype == nicira_ext.NXAC2PT_USERDATA:
            size = (length - 4 + 3) // 4 * 4
            if size > 4 and size % 8 == 0:
                size += 4
        pos += 4 + size


_ACTION_INSTRUCTIONS = (ofp.OFPIT_WRITE_ACTIONS, ofp.OFPIT_APPLY_ACTIONS, ofp.OFPIT_CLEAR_ACTIONS)


def check_instructions(buf: bytes, off: int, end: int) -> None:
    pos = off
    while pos < end:
        _need(pos + 4 <= end, f"instruction header at {pos} runs past {end}")
        itype, length = struct.unpack_from("!HH", buf, pos)
        _need(length >= 8 and length % 8 == 0, f"instruction type {itype} length {length} is not a multiple of 8 >= 8")
        _need(pos + length <= end, f"instruction at {pos} (length {length}) runs past {end}")
        if itype in _ACTION_INSTRUCTIONS:
            check_actions(buf, pos + ofp.OFP_INSTRUCTION_ACTIONS_SIZE, pos + length)
        pos += length


def check_flow_stats(buf: bytes, off: int, end: int) -> None:
    pos = off
    while pos < end:
        _need(pos + 2 <= end, "flow-stats entry header runs past the message")
        length = _u16(buf, pos)
        _need(length >= ofp.OFP_FLOW_STATS_SIZE, f"flow-stats entry length {length} < {ofp.OFP_FLOW_STATS_SIZE}")
        _need(pos + length <= end, f"flow-stats entry at {pos} (length {length}) runs past {end}")
        after_match = check_match(buf, pos + ofp.OFP_FLOW_STATS_0_SIZE, pos + length)
        check_instructions(buf, after_match, pos + length)
        pos += length


# a multipart body check: (buffer, body offset, body end); raises on a malformed body
BodyCheck = Callable[[bytes, int, int], None]

# table-feature properties whose body os-ken parses as a list of (type, length) headed ids
_ID_LISTS = {
    ofp.OFPTFPT_INSTRUCTIONS,
    ofp.OFPTFPT_INSTRUCTIONS_MISS,
    ofp.OFPTFPT_WRITE_ACTIONS,
    ofp.OFPTFPT_WRITE_ACTIONS_MISS,
    ofp.OFPTFPT_APPLY_ACTIONS,
    ofp.OFPTFPT_APPLY_ACTIONS_MISS,
}
_OXM_LISTS = {
    ofp.OFPTFPT_MATCH,
    ofp.OFPTFPT_WILDCARDS,
    ofp.OFPTFPT_WRITE_SETFIELD,
    ofp.OFPTFPT_WRITE_SETFIELD_MISS,
    ofp.OFPTFPT_APPLY_SETFIELD,
    ofp.OFPTFPT_APPLY_SETFIELD_MISS,
}


def _all_four_bytes(buf: bytes, off: int, end: int, ids: bool) -> bool:
    """Every element of the list is 4 bytes (an id of length 4; an OXM id outside the
    experimenter class): what OVS sends, checked in C rather than one element at a time. The
    walk below then steps by 4 and ends exactly at ``end``, so the verdict is the walk's."""
    if (end - off) % 4:
        return False
    heads = struct.iter_unpack("!HH", memoryview(buf)[off:end])
    if ids:
        return all(length == 4 for _, length in heads)
    return all(cls != ofp.OFPXMC_EXPERIMENTER for cls, _ in heads)


def _check_table_feature_prop(buf: bytes, ptype: int, off: int, end: int) -> None:
    if (ptype in _ID_LISTS or ptype in _OXM_LISTS) and _all_four_bytes(buf, off, end, ptype in _ID_LISTS):
        return
    if ptype in _ID_LISTS:
        pos = off
        while pos < end:
            _need(pos + 4 <= end, f"table-feature id at {pos} runs past {end}")
            length = _u16(buf, pos + 2)
            _need(length >= 4 and pos + length <= end, f"table-feature id at {pos} has length {length}")
            pos += length
    elif ptype in _OXM_LISTS:
        pos = off
        while pos < end:  # a 4-byte OXM header, +4 (the experimenter id) for class 0xffff
            _need(pos + 4 <= end, f"table-feature OXM id at {pos} runs past {end}")
            size = 8 if _u16(buf, pos) == ofp.OFPXMC_EXPERIMENTER else 4
            _need(pos + size <= end, f"table-feature experimenter OXM id at {pos} runs past {end}")
            pos += size


def check_table_features(buf: bytes, off: int, end: int) -> None:
    """OFPMP_TABLE_FEATURES entries (asked at connect, ``runtime/switchfacts.py``): every entry
    and property length inside its container, so os-ken's parser never reads past one."""
    pos = off
    while pos < end:
        _need(pos + 2 <= end, "table-features entry header runs past the message")
        length = _u16(buf, pos)
        _need(length >= ofp.OFP_TABLE_FEATURES_SIZE, f"table-features entry length {length} < 64")
        _need(pos + length <= end, f"table-features entry at {pos} (length {length}) runs past {end}")
        prop, entry_end = pos + ofp.OFP_TABLE_FEATURES_SIZE, pos + length
        while prop < entry_end:
            _need(prop + 4 <= entry_end, f"table-feature property header at {prop} runs past {entry_end}")
            ptype, plen = _u16(buf, prop), _u16(buf, prop + 2)
            _need(plen >= 4 and prop + plen <= entry_end, f"table-feature property at {prop} has length {plen}")
            _check_table_feature_prop(buf, ptype, prop + 4, prop + plen)
            prop += (plen + 7) // 8 * 8
        pos += length


def check_group_desc(buf: bytes, off: int, end: int) -> None:
    """OFPMP_GROUP_DESC entries (asked by reconcile, ``runtime/resync.py``): each entry's
    length, each bucket's, and the actions inside, as os-ken's parser walks them."""
    pos = off
    while pos < end:
        _need(end - pos >= ofp.OFP_GROUP_DESC_SIZE, f"group entry at {pos}: {end - pos} bytes left")
        length = _u16(buf, pos)
        _need(length >= ofp.OFP_GROUP_DESC_SIZE and pos + length <= end, f"group entry at {pos} has length {length}")
        bucket, entry_end = pos + ofp.OFP_GROUP_DESC_SIZE, pos + length
        while bucket < entry_end:
            blen = _u16(buf, bucket)
            _need(
                blen >= ofp.OFP_BUCKET_SIZE and bucket + blen <= entry_end,
                f"group bucket at {bucket} has length {blen}",
            )
            check_actions(buf, bucket + ofp.OFP_BUCKET_SIZE, bucket + blen)
            bucket += blen
        pos += length


def _fixed_entries(size: int) -> BodyCheck:
    def check(buf: bytes, off: int, end: int) -> None:
        _need((end - off) % size == 0, f"body of {end - off} bytes is not a multiple of {size}")

    return check


def _exactly_one(size: int) -> BodyCheck:
    def check(buf: bytes, off: int, end: int) -> None:
        _need(end - off >= size, f"body of {end - off} bytes, expected {size}")

    return check


# multipart replies we ask for (or os-ken asks for on connect); anything else is dropped unparsed
_MULTIPART: dict[int, BodyCheck] = {
    ofp.OFPMP_DESC: _exactly_one(ofp.OFP_DESC_SIZE),
    ofp.OFPMP_FLOW: check_flow_stats,
    ofp.OFPMP_AGGREGATE: _exactly_one(ofp.OFP_AGGREGATE_STATS_REPLY_SIZE),
    ofp.OFPMP_TABLE: _fixed_entries(ofp.OFP_TABLE_STATS_SIZE),
    ofp.OFPMP_PORT_STATS: _fixed_entries(ofp.OFP_PORT_STATS_SIZE),
    ofp.OFPMP_PORT_DESC: _fixed_entries(ofp.OFP_PORT_SIZE),
    ofp.OFPMP_TABLE_FEATURES: check_table_features,
    ofp.OFPMP_METER_FEATURES: _fixed_entries(ofp.OFP_METER_FEATURES_SIZE),  # none: a switch without meters
    ofp.OFPMP_GROUP_DESC: check_group_desc,
}


def _multipart(buf: bytes, end: int) -> Verdict:
    _need(end >= ofp.OFP_MULTIPART_REPLY_SIZE, f"multipart reply of {end} bytes < 16")
    mp_type = _u16(buf, HEADER)
    check = _MULTIPART.get(mp_type)
    if check is None:
        return Verdict(DROP, f"multipart type {mp_type} not requested")
    check(buf, ofp.OFP_MULTIPART_REPLY_SIZE, end)
    return Verdict(OK)


def _hello(buf: bytes, end: int) -> Verdict:
    pos = HEADER
    while pos < end:
        _need(pos + 4 <= end, f"hello element header at {pos} runs past {end}")
        etype, length = struct.unpack_from("!HH", buf, pos)
        _need(length >= 4, f"hello element type {etype} length {length} < 4")
        _need(pos + length <= end, f"hello element at {pos} (length {length}) runs past {end}")
        pos += length  # os-ken advances by the unpadded length
    return Verdict(OK)


# message type -> minimum length, for bodies without inner TLVs
_FIXED = {
    ofp.OFPT_ERROR: ofp.OFP_ERROR_MSG_SIZE,
    ofp.OFPT_ECHO_REQUEST: HEADER,
    ofp.OFPT_ECHO_REPLY: HEADER,
    ofp.OFPT_FEATURES_REPLY: ofp.OFP_SWITCH_FEATURES_SIZE,
    ofp.OFPT_GET_CONFIG_REPLY: ofp.OFP_SWITCH_CONFIG_SIZE,
    ofp.OFPT_PORT_STATUS: ofp.OFP_PORT_STATUS_SIZE,
    ofp.OFPT_BARRIER_REPLY: HEADER,
    ofp.OFPT_ROLE_REPLY: ofp.OFP_ROLE_REQUEST_SIZE,
    ofp.OFPT_GET_ASYNC_REPLY: ofp.OFP_ASYNC_CONFIG_SIZE,
}
# well-framed but never needed: not parsed
_DROPPED = {
    ofp.OFPT_EXPERIMENTER: "experimenter message",
    ofp.OFPT_QUEUE_GET_CONFIG_REPLY: "queue config reply not requested",
}
# where the match starts in messages that carry one
_MATCH_AT = {
    ofp.OFPT_PACKET_IN: ofp.OFP_PACKET_IN_SIZE - ofp.OFP_MATCH_SIZE,
    ofp.OFPT_FLOW_REMOVED: ofp.OFP_FLOW_REMOVED_SIZE - ofp.OFP_MATCH_SIZE,
}


def check_message(buf: bytes) -> Verdict:
    """Verdict for one whole message (``buf`` holds exactly the header's length). Never raises."""
    try:
        return _check(bytes(buf))
    except Malformed as exc:
        return Verdict(REJECT, str(exc))
    except (struct.error, IndexError) as exc:  # defensive: the checks above should prevent these
        return Verdict(REJECT, f"truncated: {exc}")


def _check(buf: bytes) -> Verdict:
    _need(len(buf) >= HEADER, f"message of {len(buf)} bytes < header")
    version, msg_type, length, _xid = struct.unpack_from("!BBHI", buf, 0)
    _need(length >= HEADER, f"header length {length} < {HEADER}")
    _need(length == len(buf), f"header length {length} != {len(buf)} bytes framed")
    if msg_type == ofp.OFPT_HELLO:  # any version: this is how versions are negotiated
        return _hello(buf, length)
    if version != OF13:
        if msg_type == ofp.OFPT_ERROR:
            return Verdict(DROP, f"error message of version {version}")
        return Verdict(REJECT, f"version {version} message type {msg_type}: only OpenFlow 1.3 is spoken here")
    if msg_type in _DROPPED:
        return Verdict(DROP, _DROPPED[msg_type])
    if msg_type in _FIXED:
        _need(length >= _FIXED[msg_type], f"message type {msg_type} of {length} bytes < {_FIXED[msg_type]}")
        return Verdict(OK)
    if msg_type in _MATCH_AT:
        at = _MATCH_AT[msg_type]
        _need(length >= at + ofp.OFP_MATCH_SIZE, f"message type {msg_type} of {length} bytes too short for its match")
        check_match(buf, at, length)
        return Verdict(OK)
    if msg_type == ofp.OFPT_MULTIPART_REPLY:
        return _multipart(buf, length)
    return Verdict(REJECT, f"message type {msg_type} is not one a switch sends")
