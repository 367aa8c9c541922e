"""Removing what ``lane`` compiled, and the meter ids it uses. Pure (``datapath=None``).

A removal's flow-mods are deletes by exact cookie in every table (``cookie_delete``): nine of them
in a lab release (the lane's on each switch, the shared flows of its addresses). Built through
os-ken's constructor and serialiser each cost ~10 us when hot and several times that in ``serve``,
on a path that runs between a release's request and its deletes leaving; ``CookieDelete`` is the
same message built from one prototype and packed in one call.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import ctlane
from viplanes.controller.compile.base import ARP_PUNT_METER, border_switch
from viplanes.controller.compile.cookies import EXACT_MASK, lane_cookie
from viplanes.controller.compile.groups import lane_group_deletes
from viplanes.controller.compile.path import LaneCompileError
from viplanes.topologies.model import Topology

OFMsgs = list[Any]

# header (version, type, length, xid), cookie, cookie mask, then the constant rest of an
# OFPFC_DELETE in every table: timeouts 0, default priority, no buffer, any out port and group,
# no flags, and an empty OXM match (type 1, length 4, padded to 8)
_HEAD = struct.Struct("!BBHIQQ")
_TAIL = struct.pack(
    "!BBHHHIIIHxx",
    ofp.OFPTT_ALL,
    ofp.OFPFC_DELETE,
    0,
    0,
    ofp.OFP_DEFAULT_PRIORITY,
    ofp.OFP_NO_BUFFER,
    ofp.OFPP_ANY,
    ofp.OFPG_ANY,
    0,
) + struct.pack("!HH4x", ofp.OFPMT_OXM, 4)
_DELETE_LEN = _HEAD.size + len(_TAIL)


# every attribute of such a delete as os-ken's constructor sets it, the cookie aside; its empty
# match is shared by every CookieDelete (nothing edits a message's match after it is built)
_PROTOTYPE = dict(
    vars(
        parser.OFPFlowMod(
            None,
            cookie=0,
            cookie_mask=EXACT_MASK,
            table_id=ofp.OFPTT_ALL,
            command=ofp.OFPFC_DELETE,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
            match=parser.OFPMatch(),
        )
    )
)


class CookieDelete(parser.OFPFlowMod):
    """``OFPFlowMod(cookie=c, cookie_mask=EXACT_MASK, table_id=OFPTT_ALL, command=OFPFC_DELETE,
    out_port=OFPP_ANY, out_group=OFPG_ANY, match=OFPMatch())``, attribute for attribute and byte
    for byte (``tests/unit/controller/compile/test_cookie_delete.py``), made and serialised
    without os-ken's per-field work."""

    xid: int | None
    cookie: int
    cookie_mask: int

    def __init__(self, cookie: int) -> None:
        self.__dict__.update(_PROTOTYPE)
        self.instructions: list[Any] = []
        self.cookie = cookie

    def serialize(self) -> None:
        if self.xid is None:
            self.xid = 0
        self.version, self.msg_type, self.msg_len = ofp.OFP_VERSION, ofp.OFPT_FLOW_MOD, _DELETE_LEN
        head = _HEAD.pack(ofp.OFP_VERSION, ofp.OFPT_FLOW_MOD, _DELETE_LEN, self.xid, self.cookie, self.cookie_mask)
        self.buf = bytearray(head + _TAIL)


def cookie_delete(cookie: int) -> CookieDelete:
    """Delete every flow carrying exactly ``cookie``, in every table."""
    return CookieDelete(cookie)


def meter_id_for(lane_id: int) -> int:
    """A rate-capped lane's meter id is its lane id; ``ARP_PUNT_METER`` is reserved."""
    if not 1 <= lane_id < ARP_PUNT_METER:
        raise LaneCompileError(f"lane id {lane_id} has no meter id (1..{ARP_PUNT_METER - 1})")
    return lane_id


def newconn_border(topo: Topology | None) -> int | None:
    """The dpid holding lanes' new-connection meters (a conntrack border), if any."""
    border = border_switch(topo) if topo is not None else None
    return border.dpid if border is not None and border.conntrack else None


def compile_lane_removal(
    lane_id: int,
    dpids: Iterable[int],
    *,
    with_meter: bool = True,
    newconn_at: int | None = None,
    groups_at: Iterable[int] = (),
) -> dict[int, OFMsgs]:
    """Delete every flow of the lane (by exact cookie, all tables), then its meter, on
    ``newconn_at`` (its conntrack border) its new-connection meter, and on ``groups_at`` (those
    of ``dpids`` that have groups) its fast-failover group (no error where it has none)."""
    group_dpids = set(groups_at)
    cookie = lane_cookie(lane_id)
    out: dict[int, OFMsgs] = {}
    for dpid in dict.fromkeys(dpids):
        ofmsgs: OFMsgs = [cookie_delete(cookie)]
        if with_meter and lane_id <= ofp.OFPM_MAX:
            ofmsgs.append(parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=meter_id_for(lane_id)))
        if dpid == newconn_at and lane_id <= ctlane.NEWCONN_MAX_LANE_ID:
            meter_id = ctlane.newconn_meter_id(lane_id)
            ofmsgs.append(parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=meter_id))
        if dpid in group_dpids:
            ofmsgs += lane_group_deletes(lane_id, [dpid]).get(dpid, [])
        out[dpid] = ofmsgs
    return out


def group_holders(topo: Topology | None, dpids: Iterable[int]) -> list[int]:
    """Those of ``dpids`` whose switch declares fast-failover groups (a lane's group may be there)."""
    if topo is None:
        return []
    out = []
    for dpid in dpids:
        sw = topo.switch_by_dpid(dpid)
        if sw is not None and sw.caps.features.fast_failover:
            out.append(dpid)
    return out


def compile_flow_delete(flow: Any) -> Any:
    """A DELETE_STRICT for exactly one flow (a stale OFPFlowStats entry, or a FlowMod we sent):
    same table, priority, match and cookie; nothing else on the switch is touched."""
    return parser.OFPFlowMod(
        None,
        table_id=flow.table_id,
        command=ofp.OFPFC_DELETE_STRICT,
        priority=flow.priority,
        cookie=flow.cookie,
        cookie_mask=EXACT_MASK,
        out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=flow.match,
    )
