"""A takeover lane: a connection already running through the campus NAT, moved onto a lane.

Pure, like ``compile_lane``. The far end knows the connection as the NAT box's outside address
and the port the NAT chose (``LaneSpec.takeover``); a lane that showed it a lane-pool address
instead would be reset (docs/automatic-lanes.md). So the border rewrites the exact 5-tuple both
ways with set_field, statelessly, even on a conntrack border:

- forward (last hop): ``ipv4_src``:= NAT address, ``tcp_src``/``udp_src``:= NAT port, the lane MAC
  as source, the edge router's MAC as destination, out to the edge;
- reverse (last hop): from the edge, exactly ``dst:dport -> NAT address:NAT port`` (TCP: with ACK,
  so no connection can be opened inwards) -> ``ipv4_dst``:= host, ``*_dst``:= host port, towards
  the host along the lane.

Why stateless: OVS conntrack would have to pick up a mid-stream TCP connection (its ``+new`` for
a segment without SYN depends on the kernel's ``nf_conntrack_tcp_loose``) and commit it with
``nat(src=addr:port)`` in a zone of its own; the exact tuple both ways needs no state, and the NAT
box keeps its own conntrack entry, so the connection falls back to it when the lane ends. No ARP
reply or ICMP flow is shared: the NAT address stays the NAT box's (the edge router's ARP for it is
answered by the box itself), and replies are taken at the border by their exact tuple.

Order (``split_diversion``): the replies move first, the data last. The NAT box and the firewall
track the connection's sequence numbers; a far end's ACK for data that went by the lane, handed to
them because the border still sent it their way, is beyond what they saw: conntrack marks it
INVALID, the NAT cannot translate it back, and the box's own stack answers the far end with a
reset. Data still passing the NAT box while its ACKs already take the lane stays inside the
window the box last saw (milliseconds of it), so that order is harmless.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.base import PRIORITY_LANE
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.controller.compile.fastmatch import PackedSetField, exact_match
from viplanes.controller.compile.path import LaneCompileError, deliver_to_host, lane_hops, lane_source
from viplanes.domain.matches import ETH_TYPE, IP_PROTO
from viplanes.domain.values import LaneSpec, NatMapping
from viplanes.topologies.model import Topology

OFPVID_NONE = 0x0000
TCP_ACK = 0x010


def nat_outside_addresses(topo: Topology) -> frozenset[str]:
    """The campus NAT boxes' outside addresses: the only addresses a takeover may translate to."""
    return frozenset(str(mb.outside.ip.ip) for mb in topo.middleboxes if mb.kind == "nat")


def check_takeover(lane: LaneSpec, topo: Topology) -> NatMapping:
    """A takeover lane is one exact IPv4 5-tuple of a NAT'd host, translated to a NAT box's
    outside address; anything else is refused, every problem named."""
    m = lane.takeover
    if m is None:
        raise LaneCompileError(f"lane {lane.lane_id}: no NAT mapping to take over")
    problems = []
    if lane.nat_ip is not None:
        problems.append("a takeover lane has no lane-pool address")
    if lane.src_port is None or not lane.is_single:
        problems.append("a takeover lane is one exact 5-tuple (source port, one address, one port)")
    if m.address not in nat_outside_addresses(topo):
        problems.append(f"{m.address} is no NAT box's outside address")
    if not 1 <= m.port <= 65535:
        problems.append(f"NAT port {m.port} is not 1..65535")
    if lane.dst_ip is not None and ipaddress.ip_address(lane.dst_ip).version != 4:
        problems.append("the campus NAT translates IPv4 only")
    if lane.protocol not in IP_PROTO:
        problems.append(f"protocol {lane.protocol!r} is not tcp or udp")
    if problems:
        raise LaneCompileError(f"lane {lane.lane_id}: " + "; ".join(problems))
    return m


def compile_takeover(lane: LaneSpec, topo: Topology, hard: int) -> dict[int, list[Any]]:
    """Per dpid on the lane's path: its forward and reverse flows (no meters, no shared flows)."""
    m = check_takeover(lane, topo)
    host = lane_source(lane, topo)
    hops = lane_hops(lane, topo)
    proto, host_ip, dst = lane.protocol, str(host.iface.ip.ip), str(lane.dst_ip)
    sport, dport = lane.src_port, lane.dst_port
    common = {"eth_type": ETH_TYPE[4], "ip_proto": IP_PROTO[proto]}
    fwd = {**common, "ipv4_src": host_ip, "ipv4_dst": dst, f"{proto}_src": sport, f"{proto}_dst": dport}
    rev = {**common, "ipv4_src": dst, "ipv4_dst": host_ip, f"{proto}_src": dport, f"{proto}_dst": sport}
    lane_mac = topo.lane_pool.mac
    last = len(hops) - 1
    out: dict[int, list[Any]] = {h.dpid: [] for h in hops}

    def flow(match: dict[str, Any], actions: list[Any]) -> Any:
        return parser.OFPFlowMod(
            None,
            table_id=0,
            cookie=lane_cookie(lane.lane_id),
            command=ofp.OFPFC_ADD,
            priority=PRIORITY_LANE + 1,  # a pinned source port, like every exact 5-tuple lane
            idle_timeout=0,
            hard_timeout=hard,
            flags=ofp.OFPFF_SEND_FLOW_REM,
            buffer_id=ofp.OFP_NO_BUFFER,
            match=exact_match(match),
            instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)],
        )

    for i, hop in enumerate(hops):
        if i == 0:
            match = {"in_port": hop.in_port, "eth_src": host.iface.mac, "vlan_vid": OFPVID_NONE, **fwd}
        else:
            match = {"in_port": hop.in_port, "eth_src": lane_mac, **fwd}
        if i == last:
            actions: list[Any] = [
                PackedSetField(ipv4_src=m.address),
                PackedSetField(**{f"{proto}_src": m.port}),
                PackedSetField(eth_src=lane_mac),
                PackedSetField(eth_dst=topo.edge.inside.mac),
                parser.OFPActionOutput(hop.out_port),
            ]
        else:
            actions = ([PackedSetField(eth_src=lane_mac)] if i == 0 else []) + [parser.OFPActionOutput(hop.out_port)]
        out[hop.dpid].append(flow(match, actions))
        if i < last:
            back_transit = {"in_port": hop.out_port, "eth_src": lane_mac, **rev}
            out[hop.dpid].append(flow(back_transit, deliver_to_host(topo, host, hops, i)))
            continue
        back: dict[str, Any] = {**rev, "in_port": hop.out_port, "ipv4_dst": m.address, f"{proto}_dst": m.port}
        if proto == "tcp":  # no inbound connection set-up: a bare SYN never passes
            back["tcp_flags"] = (TCP_ACK, TCP_ACK)
        restore = [PackedSetField(ipv4_dst=host_ip), PackedSetField(**{f"{proto}_dst": sport})]
        out[hop.dpid].append(flow(back, restore + deliver_to_host(topo, host, hops, i)))
    return out


def split_diversion(
    lane: LaneSpec, topo: Topology, per_dpid: dict[int, list[Any]]
) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """A new takeover's messages in two steps: first every flow that carries the replies or waits,
    inert, for packets already on the lane; then the first switch's forward diversion, the one
    flow that moves the data. ``Changes`` sends the second only after the switches confirmed the
    first and their cached datapath flows had time to follow (module docstring: why)."""
    first = lane_hops(lane, topo)[0]
    before: dict[int, list[Any]] = {}
    after: dict[int, list[Any]] = {}
    for dpid, msgs in per_dpid.items():
        for msg in msgs:
            diverts = (
                dpid == first.dpid
                and isinstance(msg, parser.OFPFlowMod)
                and msg.command == ofp.OFPFC_ADD
                and msg.match.get("in_port") == first.in_port
            )
            (after if diverts else before).setdefault(dpid, []).append(msg)
    return before, after
