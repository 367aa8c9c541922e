"""One hop's rules of a lane: the forward and reverse flows of one (destination, port entry)
match on one switch of its path, and the FlowMod every lane flow is built with.

Split from ``lane.py`` so ``compile_lane`` reads as the plan of a lane (meters, hops, the
conntrack border) and this module as what each switch on the path is told. The lane's design
(marker, "no second door", stateless fallback) is in ``lane.py``'s docstring.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import conntrack, ctlane
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.controller.compile.fastmatch import PackedSetField, exact_match
from viplanes.controller.compile.path import deliver_to_host
from viplanes.domain.matches import LaneMatch
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Host, Topology

TCP_ACK = 0x010
OFPVID_NONE = 0x0000  # OpenFlow 1.3: match only frames without an 802.1Q tag

OFMsgs = list[Any]


def lane_match(fields: dict[str, Any]) -> Any:
    """An OFPMatch of exact lane fields, identical to ``OFPMatch(**fields)`` but built without
    os-ken's per-field conversions (80% of compile time at 10,000 lanes): ``fastmatch``."""
    return exact_match(fields)


def lane_flow(
    lane: LaneSpec,
    priority: int,
    hard: int,
    match: dict[str, Any],
    actions: list[Any],
    meter: int | None,
    table_id: int = 0,
) -> Any:
    """One lane FlowMod: the lane's cookie and hard timeout, flow-removed reports, no idle timeout."""
    inst: list[Any] = [parser.OFPInstructionMeter(meter)] if meter is not None else []
    inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
    return parser.OFPFlowMod(
        None,
        table_id=table_id,
        cookie=lane_cookie(lane.lane_id),
        command=ofp.OFPFC_ADD,
        priority=priority,
        idle_timeout=0,
        hard_timeout=hard,
        flags=ofp.OFPFF_SEND_FLOW_REM,
        buffer_id=ofp.OFP_NO_BUFFER,
        match=lane_match(match),
        instructions=inst,
    )


def compile_hop(
    lane: LaneSpec,
    topo: Topology,
    host: Host,
    hops: tuple[Any, ...],
    i: int,
    pair: LaneMatch,
    nat_ip: str | None,
    priority: int,
    hard: int,
    meter: int | None,
    with_ct: bool,
    out: dict[int, OFMsgs],
) -> None:
    """The forward and reverse rules of one (destination, port entry) match on hop ``i``."""
    key = f"ipv{pair.version}"
    host_mac, lane_mac = host.iface.mac, topo.lane_pool.mac
    host_addr = pair.fwd[f"{key}_src"]
    fwd, rev = pair.fwd, pair.rev
    last = len(hops) - 1
    hop = hops[i]
    # forward: host -> edge router
    if i == 0:
        match = {"in_port": hop.in_port, "eth_src": host_mac, "vlan_vid": OFPVID_NONE, **fwd}
    else:
        match = {"in_port": hop.in_port, "eth_src": lane_mac, **fwd}
    actions: list[Any] = []
    if i == last:
        if with_ct:  # committed (metered when +new) in CT_COMMIT_TABLE: ctlane
            actions += ctlane.lookup_actions(lane.lane_id, ctlane.zone_for(topo, host, nat_ip))
        elif nat_ip is not None:
            actions.append(PackedSetField(ipv4_src=nat_ip))
        # stateless: the edge router sees the lane MAC when translated, else the host's own
        if not with_ct:
            actions += [
                PackedSetField(eth_src=lane_mac if nat_ip else host_mac),
                PackedSetField(eth_dst=topo.edge.inside.mac),
                parser.OFPActionOutput(hop.out_port),
            ]
    else:
        if i == 0:
            actions.append(PackedSetField(eth_src=lane_mac))
        actions.append(parser.OFPActionOutput(hop.out_port))
    out[hop.dpid].append(lane_flow(lane, priority, hard, match, actions, meter if i == 0 else None))
    # reverse: edge router -> host
    if i < last:
        match = {"in_port": hop.out_port, "eth_src": lane_mac, **rev}
        out[hop.dpid].append(
            lane_flow(lane, priority, hard, match, deliver_to_host(topo, host, hops, i, pair.version), None)
        )
        return
    match = {"in_port": hop.out_port, **rev, f"{key}_dst": nat_ip or host_addr}
    if with_ct:
        out[hop.dpid].append(
            lane_flow(lane, priority, hard, match, [conntrack.track_reply(ctlane.zone_for(topo, host, nat_ip))], meter)
        )
        return
    if lane.protocol == "tcp":  # stateless: no inbound connection set-up (a bare SYN never passes)
        match["tcp_flags"] = (TCP_ACK, TCP_ACK)
    actions = [PackedSetField(ipv4_dst=host_addr)] if nat_ip else []
    out[hop.dpid].append(
        lane_flow(lane, priority, hard, match, actions + deliver_to_host(topo, host, hops, i, pair.version), meter)
    )
