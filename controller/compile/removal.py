"""Removing what ``lane`` compiled, and the meter ids it uses. Pure (``datapath=None``)."""

from __future__ import annotations

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
        ofmsgs: OFMsgs = [
            parser.OFPFlowMod(
                None,
                cookie=cookie,
                cookie_mask=EXACT_MASK,
                table_id=ofp.OFPTT_ALL,
                command=ofp.OFPFC_DELETE,
                out_port=ofp.OFPP_ANY,
                out_group=ofp.OFPG_ANY,
                match=parser.OFPMatch(),
            )
        ]
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
