"""Flows that belong to an address, not to one lane: several lanes of one host share its lane
address (and its path), so these are installed with the first live lane using the address
(ADD is idempotent) and deleted when the last one ends. Cookie kind: ``cookies.shared_cookie``.

- Switch-side ARP reply (issue 10), border switch, ``PRIORITY_ARP_REPLY``: the edge router's
  ARP request for an active lane-pool address is turned into the reply with set-field actions
  and sent back out the port it came in, so a lane keeps working while the controller is away.
- Related ICMP errors for a lane address (border with conntrack), ``PRIORITY_RELATED_NAT``:
  destination-unreachable and time-exceeded (ICMPv6: also packet-too-big) from the edge for a
  lane-pool address, or for the host's own public IPv4 / IPv6 address of untranslated lanes, go
  through conntrack in that address's zone (``conntrack.ZoneLayout``), where its lanes'
  connections live. When a pool address's last lane ends its zone is flushed (``flush_zone``).
- ICMP errors between switches (lanes longer than one switch): at every non-border switch of
  the path, an ICMP packet marked with the lane MAC for the host goes on towards the host (the
  border only ever marks ICMP errors that conntrack related to a lane, or, stateless, a
  fragmentation-needed for the lane address).
- Stateless fallback only (border ``conntrack: false``): ICMP fragmentation-needed for the lane
  address passes to the host (outer destination translated).
- Dual stack, host with a global ``ip6``: the same for ICMPv6 (transit of marked errors to the
  host's ip6; stateless: packet-too-big for it), under the host's v4 address's cookie.

No hard timeout: they open nothing by themselves (an ARP answer for an address no lane uses leads
to the table-1/guard drops), and one lane's deadline must not cut another's. Reconcile deletes
them when no live lane uses the address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import conntrack, ctlane
from viplanes.controller.compile import path as lanepath
from viplanes.controller.compile.base import (
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    ICMP_ERRORS,
    ICMPV6_ERRORS,
    IP_PROTO_ICMP,
    IP_PROTO_ICMPV6,
    PRIORITY_ARP_REPLY,
    PRIORITY_LANE,
    PRIORITY_RELATED_NAT,
    border_switch,
    dual_stack,
    flow,
)
from viplanes.controller.compile.cookies import shared_cookie
from viplanes.controller.compile.fastmatch import PackedSetField, exact_match
from viplanes.controller.compile.flowkey import flow_key_of
from viplanes.controller.compile.removal import cookie_delete
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology


def _match(**fields: Any) -> Any:
    """``OFPMatch(**fields)``, from fastmatch's per-field cache (same fields, same order)."""
    return exact_match(fields)


def _track(zone: int) -> Any:
    return conntrack.track_reply(zone)


OFMsgs = list[Any]
ICMP_FRAG_NEEDED = (3, 4)
ICMPV6_PACKET_TOO_BIG = 2


def lane_addresses(lane: LaneSpec, topo: Topology) -> dict[str, dict[int, OFMsgs]]:
    """address -> dpid -> the shared flows this lane needs (empty when it cannot be built)."""
    if lane.takeover is not None:  # the NAT box's address stays the box's: no ARP, no ICMP flows
        return {}
    try:
        host = lanepath.lane_source(lane, topo)
        hops = lanepath.lane_hops(lane, topo)
    except ValueError:
        return {}
    lane = lanepath.as_compiled(lane, topo)  # no lane-pool address at the border when the router translates
    host_ip, lane_mac = str(host.iface.ip.ip), topo.lane_pool.mac
    # v6 ICMP errors need flows only where v6 lanes can exist
    host_ip6 = str(host.ip6) if host.ip6 is not None and dual_stack(topo) else None
    edge = topo.edge.inside
    border = hops[-1]
    out: dict[str, dict[int, OFMsgs]] = {}

    def add(address: str, dpid: int, msg: Any) -> None:
        out.setdefault(address, {}).setdefault(dpid, []).append(msg)

    if lane.nat_ip:
        nat = str(lane.nat_ip)
        add(
            nat,
            border.dpid,
            flow(
                PRIORITY_ARP_REPLY,
                shared_cookie(nat),
                _match(in_port=border.out_port, eth_type=ETH_TYPE_ARP, arp_op=1, arp_spa=str(edge.ip.ip), arp_tpa=nat),
                [
                    PackedSetField(eth_dst=edge.mac),
                    PackedSetField(eth_src=lane_mac),
                    PackedSetField(arp_op=2),
                    PackedSetField(arp_sha=lane_mac),
                    PackedSetField(arp_spa=nat),
                    PackedSetField(arp_tha=edge.mac),
                    PackedSetField(arp_tpa=str(edge.ip.ip)),
                    parser.OFPActionOutput(ofp.OFPP_IN_PORT),
                ],
            ),
        )
        if lanepath.stateful(topo):
            for icmp_type in ICMP_ERRORS:
                add(
                    nat,
                    border.dpid,
                    flow(
                        PRIORITY_RELATED_NAT,
                        shared_cookie(nat),
                        _match(
                            in_port=border.out_port,
                            eth_type=ETH_TYPE_IPV4,
                            ip_proto=IP_PROTO_ICMP,
                            icmpv4_type=icmp_type,
                            ipv4_dst=nat,
                        ),
                        [_track(ctlane.zone_layout(topo).nat(nat))],
                    ),
                )
    if lanepath.stateful(topo):  # errors for the host's own addresses: in its own zone (ctlane)
        zone = ctlane.zone_for(topo, host, None)
        if not lane.nat_ip:
            for icmp_type in ICMP_ERRORS:
                match = _match(
                    in_port=border.out_port,
                    eth_type=ETH_TYPE_IPV4,
                    ip_proto=IP_PROTO_ICMP,
                    icmpv4_type=icmp_type,
                    ipv4_dst=host_ip,
                )
                add(host_ip, border.dpid, flow(PRIORITY_RELATED_NAT, shared_cookie(host_ip), match, [_track(zone)]))
        if host_ip6 is not None:
            for icmp_type in ICMPV6_ERRORS:
                match = _match(
                    in_port=border.out_port,
                    eth_type=ETH_TYPE_IPV6,
                    ip_proto=IP_PROTO_ICMPV6,
                    icmpv6_type=icmp_type,
                    ipv6_dst=host_ip6,
                )
                add(host_ip, border.dpid, flow(PRIORITY_RELATED_NAT, shared_cookie(host_ip), match, [_track(zone)]))
    for i, hop in enumerate(hops[:-1]):
        add(
            host_ip,
            hop.dpid,
            flow(
                PRIORITY_LANE,
                shared_cookie(host_ip),
                _match(
                    in_port=hop.out_port,
                    eth_src=lane_mac,
                    eth_type=ETH_TYPE_IPV4,
                    ip_proto=IP_PROTO_ICMP,
                    ipv4_dst=host_ip,
                ),
                lanepath.deliver_to_host(topo, host, hops, i),
            ),
        )
        if host_ip6 is not None:  # keyed by the host's v4 address: cookies hold 32 bits
            add(
                host_ip,
                hop.dpid,
                flow(
                    PRIORITY_LANE,
                    shared_cookie(host_ip),
                    _match(
                        in_port=hop.out_port,
                        eth_src=lane_mac,
                        eth_type=ETH_TYPE_IPV6,
                        ip_proto=IP_PROTO_ICMPV6,
                        ipv6_dst=host_ip6,
                    ),
                    lanepath.deliver_to_host(topo, host, hops, i, 6),
                ),
            )
    if not lanepath.stateful(topo) and host_ip6 is not None:
        add(
            host_ip,
            border.dpid,
            flow(
                PRIORITY_LANE,
                shared_cookie(host_ip),
                _match(
                    in_port=border.out_port,
                    eth_type=ETH_TYPE_IPV6,
                    ip_proto=IP_PROTO_ICMPV6,
                    icmpv6_type=ICMPV6_PACKET_TOO_BIG,
                    ipv6_dst=host_ip6,
                ),
                lanepath.deliver_to_host(topo, host, hops, len(hops) - 1, 6),
            ),
        )
    if not lanepath.stateful(topo):
        lane_src = str(lane.nat_ip or host_ip)
        actions = [PackedSetField(ipv4_dst=host_ip)] if lane.nat_ip else []
        add(
            lane_src,
            border.dpid,
            flow(
                PRIORITY_LANE,
                shared_cookie(lane_src),
                _match(
                    in_port=border.out_port,
                    eth_type=ETH_TYPE_IPV4,
                    ip_proto=IP_PROTO_ICMP,
                    icmpv4_type=ICMP_FRAG_NEEDED[0],
                    icmpv4_code=ICMP_FRAG_NEEDED[1],
                    ipv4_dst=lane_src,
                ),
                actions + lanepath.deliver_to_host(topo, host, hops, len(hops) - 1),
            ),
        )
    return out


def compile_shared(topo: Topology, lanes: Iterable[LaneSpec]) -> dict[int, OFMsgs]:
    """Per dpid, the shared flows of every address the given (live) lanes use, each once."""
    out: dict[int, OFMsgs] = {}
    seen: set[tuple[int, Any]] = set()
    for lane in lanes:
        for per_dpid in lane_addresses(lane, topo).values():
            for dpid, msgs in per_dpid.items():
                for msg in msgs:
                    key = (dpid, flow_key_of(msg))
                    if key not in seen:
                        seen.add(key)
                        out.setdefault(dpid, []).append(msg)
    return out


def compile_shared_removal(addresses_by_dpid: dict[int, set[str]], topo: Topology | None = None) -> dict[int, OFMsgs]:
    """Delete every shared flow of these addresses (exact cookie, all tables) on these switches;
    with ``topo``, at a conntrack border also flush the zone of each lane-pool address (after
    the deletes): its next holder, another host maybe, starts from an empty zone, so nothing the
    last one left counts against its limit (a zone is reused only after this flush or, if the
    border was away, once the old entries time out)."""
    out = {
        dpid: [cookie_delete(shared_cookie(addr)) for addr in sorted(addrs)]
        for dpid, addrs in addresses_by_dpid.items()
        if addrs
    }
    border = border_switch(topo) if topo is not None else None
    if topo is not None and border is not None and border.conntrack and border.dpid in out:
        layout = ctlane.zone_layout(topo)
        for addr in sorted(addresses_by_dpid[border.dpid]):
            if ipaddress.ip_address(addr) in layout.pool:
                out[border.dpid].append(conntrack.flush_zone(layout.nat(addr)))
    return out
