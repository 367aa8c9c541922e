"""Where a lane becomes flow rules. Pure: OpenFlow 1.3 messages built with ``datapath=None``.

The os-ken glue binds the returned ``ofmsgs`` to live datapaths and sends them. Behaviour is
tested through ``flowsim`` (a flow-table simulator with a small conntrack model), not by
comparing messages. The priority bands are in ``bands``, the base flows (guards, conntrack
plumbing) in ``base``; one hop's forward and reverse rules in ``hopflows``; flows shared by several lanes of
one address (ARP replies) in ``shared``.

A lane, host -> edge router over the switches of its path:

- Only the first switch sees the host. Its forward rule matches ``in_port`` + the host's MAC +
  untagged (``vlan_vid`` = none) + source address + protocol + destination + ports, and marks
  the packet with the lane MAC as ``eth_src``. Between switches, both directions carry that
  marker and the *untranslated* tuple; transit rules match ``in_port`` + marker + tuple. The
  guards on every switch drop the marker (and lane-pool sources) from anywhere else, so a packet
  that did not pass the lane's ingress check matches no lane rule anywhere ("no second door").
- State and NAT live at the border switch (where the edge router attaches):
  ``ct(commit, zone, nat(src=nat_ip), exec(ct_mark=lane id))`` on the way out. Back from the edge,
  the lane's reply tuple goes through ``ct(zone, nat, table=1)``; table 1 passes only ``+est+rpl``
  and ``+rel+rpl`` packets marked with this lane (so the reply of a connection the lane opened,
  and its ICMP errors, inner header un-NATed); anything else for a lane address is dropped, and
  other replies fall to NORMAL. An inbound SYN from the lane's far port is ``+new``: dropped.
- Stateless fallback (border switch with ``conntrack: false``): NAT by set_field at the border;
  reverse TCP rules also require ``tcp_flags=+ack`` (a bare SYN never passes, so no inbound
  connection can be set up); UDP replies pass by tuple; ICMP fragmentation-needed (type 3 code 4)
  addressed to the lane address passes to the host with only its outer destination translated.
  Limits, stated: any ACK-carrying segment from the far end's lane port reaches the host's other
  ports (the host answers RST; data cannot be delivered to a closed port but a stray ACK is
  seen); UDP from the far end's lane port to the host's lane port passes without the host
  having sent anything first; a NAT'd host's inner ICMP header still shows the lane address, so
  its kernel may not match the error to its socket (path MTU discovery can break for NAT'd
  hosts: use conntrack for them).

Two lanes with identical matches would overwrite each other (OpenFlow ADD replaces a flow with
the same match and priority); the policy side must never grant such a pair at the same time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import conntrack, ctlane, failover
from viplanes.controller.compile.base import (  # noqa: F401 - re-exported
    ARP_PUNT_METER,
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    PRIORITY_ARP_PROXY,
    PRIORITY_ARP_REPLY,
    PRIORITY_BYPASS_DROP,
    PRIORITY_CT_EGRESS,
    PRIORITY_CT_POOL_DROP,
    PRIORITY_GUARD,
    PRIORITY_LANE,
    PRIORITY_POOL_DROP,
    PRIORITY_RELATED,
    PRIORITY_TABLE_MISS,
    border_switch,
    compile_base,
)
from viplanes.controller.compile.checks import check_lane
from viplanes.controller.compile.cookies import (
    ALL_APP_FLOWS,
    ALL_LANE_FLOWS,
    APP_COOKIE,
    APP_COOKIE_MASK,
    BASE_COOKIE,
    lane_cookie,
    lane_id_from_cookie,
)
from viplanes.controller.compile.flowkey import flow_key, flow_key_of
from viplanes.controller.compile.hopflows import compile_hop, lane_flow, lane_match
from viplanes.controller.compile.path import (  # noqa: F401 - re-exported
    LaneCompileError,
    deliver_to_host,
    gateway_mac,
    lane_hops,
    lane_source,
    router_translates,
    stateful,
)
from viplanes.controller.compile.proxyarp import lane_pool_arp_reply
from viplanes.controller.compile.removal import (  # noqa: F401 - re-exported
    compile_flow_delete,
    compile_lane_removal,
    meter_id_for,
    newconn_border,
)
from viplanes.controller.compile.shared import compile_shared
from viplanes.controller.compile.takeover import compile_takeover
from viplanes.domain.matches import ETH_TYPE, lane_matches
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import Hop, NoLanePath

MAX_HARD_TIMEOUT = 65535  # OpenFlow's 16-bit limit: longer lanes are refreshed by the glue

OFMsgs = list[Any]


# ---- lanes -----------------------------------------------------------------------------------
def lane_dpids(lane: LaneSpec, topo: Topology) -> tuple[int, ...]:
    """Switches that carry flows of this lane (for removal and barriers): its path's, then
    its fast-failover backup's own."""
    hops = lane_hops(lane, topo)
    backup = lane_backup(lane, topo)
    extra = backup.extra_dpids(hops) if backup is not None else ()
    return tuple(h.dpid for h in hops) + extra


def path_dpids(lane: LaneSpec, topo: Topology) -> tuple[int, ...]:
    """Switches of the lane's path, without its backup's: the ones it cannot be carried
    without (a backup switch that is away gets its flows from its reconcile)."""
    return tuple(h.dpid for h in lane_hops(lane, topo))


def lane_ingress_ports(lane: LaneSpec, topo: Topology) -> frozenset[tuple[int, int]]:
    """(dpid, in_port) of the lane's two ingress rules: sum their stats for the lane's counters
    (transit rules see the same packets again)."""
    hops = lane_hops(lane, topo)
    return frozenset({(hops[0].dpid, hops[0].in_port), (hops[-1].dpid, hops[-1].out_port)})


def lane_forward_ingress(lane: LaneSpec, topo: Topology) -> tuple[int, int]:
    """(dpid, in_port) of the lane's forward ingress rule: where the campus host's packets enter."""
    first = lane_hops(lane, topo)[0]
    return first.dpid, first.in_port


def hard_timeout_for(expires_at: float, now: float) -> int:
    """Remaining lifetime in whole seconds, capped at OpenFlow's 65535; the safety net if the
    controller is away when the lane ends."""
    remaining = expires_at - now
    if math.isnan(remaining):
        raise ValueError("lane expiry is not a number")
    if remaining == math.inf:
        return MAX_HARD_TIMEOUT
    if remaining <= 0:
        raise ValueError(f"lane already expired {-remaining:.0f} s ago")
    return min(MAX_HARD_TIMEOUT, max(1, math.ceil(remaining)))


def _border_ct_new_per_s(topo: Topology) -> int:
    border = border_switch(topo)
    return border.ct_new_per_s if border is not None else 1


def flows_per_lane(hops: int, matches: int, families: int, with_ct: bool) -> int:
    """The number of flows ``compile_lane`` emits (meters and shared flows not counted): a
    forward and a reverse rule per hop and match, plus, at a conntrack border, the two table-1
    reply rules (established, related) and the two commit rules (``ctlane``) per address family
    the lane uses."""
    return 2 * hops * matches + (4 * families if with_ct else 0)


def compile_lane(
    lane: LaneSpec,
    topo: Topology,
    now: float,
    *,
    meter_command: int = ofp.OFPMC_ADD,
    newconn_command: int = ofp.OFPMC_ADD,
) -> dict[int, OFMsgs]:
    """Per dpid on the lane's path: its meter (if rate-capped) then its forward and reverse flows
    for every (destination, masked port entry) of the lane (``lane_matches``), and, at a border
    switch with conntrack, its table-1 reply flows (one pair per address family: replies are
    told apart by ``ct_mark`` = lane id, not by tuple). Shared per-address flows (ARP replies...)
    come from ``sharedflows.compile_shared``. Count: ``flows_per_lane``.

    IPv6 (a destination network of version 6) leaves from the host's own global ``ip6``, never
    translated: the same rules with ``ipv6_*`` fields, conntrack without ``nat(src=...)``.
    Neighbour discovery (ICMPv6) never matches a lane rule (lanes match tcp/udp) and keeps the
    normal path. Non-first fragments, v4 or v6, carry no L4 header: OVS reports their ports as
    0, so they match no lane rule (which all pin a destination port) and take the normal path,
    deliberately: a lane never guesses which connection a fragment belongs to. A lane's TCP does
    not fragment (path MTU discovery: ICMP "fragmentation needed" / ICMPv6 "packet too big"
    reach the host, see ``guardflows``); a fragmented UDP datagram would be split across the two
    paths, so UDP lane users keep datagrams below the path MTU.

    At a conntrack border the lane's commit is bounded (``ctlane``): its forward rule looks the
    packet up in the lane address's zone, and ``CT_COMMIT_TABLE`` meters ``+new`` with the lane's
    new-connection meter (sent first) before committing.

    Pass ``meter_command=OFPMC_MODIFY`` when re-sending a lane whose rate meters already exist,
    ``newconn_command=OFPMC_MODIFY`` when its new-connection meter does (any carried lane).
    Raises LaneCompileError / NoLanePath (both ValueError) for lanes that cannot be built, and
    ValueError when the lane has already expired.
    """
    if lane.takeover is not None:  # a running NAT'd connection: the NAT's own mapping, stateless
        return compile_takeover(lane, topo, hard_timeout_for(lane.expires_at, now))
    hops = lane_hops(lane, topo)
    out = _compile_over(lane, topo, hops, now, meter_command, newconn_command)
    backup = lane_backup(lane, topo)
    group_id = failover.group_id_for(lane.lane_id)
    if backup is None or group_id is None:
        return out
    over_backup = _compile_over(lane, topo, backup.hops, now, meter_command, newconn_command)
    return failover.merge(out, over_backup, group_id) or out


def lane_backup(lane: LaneSpec, topo: Topology) -> failover.Backup | None:
    """The lane's fast-failover backup path (``failover``), when its switches can hold one."""
    if lane.takeover is not None or failover.group_id_for(lane.lane_id) is None:
        return None
    hops = lane_hops(lane, topo)
    backup = failover.backup_path(topo, hops)
    return backup if failover.usable(topo, hops, backup) else None


def _compile_over(
    lane: LaneSpec, topo: Topology, hops: tuple[Hop, ...], now: float, meter_command: int, newconn_command: int
) -> dict[int, OFMsgs]:
    """``compile_lane`` over one path."""
    host = lane_source(lane, topo)
    nat_ip = check_lane(lane, topo, host)
    if nat_ip is not None and router_translates(topo):
        nat_ip = None  # the edge router translates: the border leaves the host's address alone
    hard = hard_timeout_for(lane.expires_at, now)
    lane_cookie(lane.lane_id)  # validates the id before anything is built
    with_ct = stateful(topo)
    if with_ct and lane.lane_id > conntrack.CT_MARK_MAX:
        raise LaneCompileError(f"lane id {lane.lane_id} does not fit ct_mark (32 bits)")
    if with_ct:
        ctlane.newconn_meter_id(lane.lane_id)  # validates the id before anything is built
    meter = meter_id_for(lane.lane_id) if lane.rate_mbps else None
    priority = PRIORITY_LANE + (1 if lane.src_port is not None else 0)
    host_ip = str(host.iface.ip.ip)
    host_ip6 = str(host.ip6) if host.ip6 is not None else None
    try:
        pairs = lane_matches(lane, host_ip, host_ip6)
        # a switch without masked port matches carries a range as one entry per exact port
        exact = (
            lane_matches(lane, host_ip, host_ip6, masked_ports=False)
            if not all(topo.switch(h.switch).caps.features.masked_ports for h in hops)
            else pairs
        )
    except ValueError as exc:
        raise LaneCompileError(str(exc)) from None
    out: dict[int, OFMsgs] = {h.dpid: [] for h in hops}

    if meter is not None and lane.rate_mbps:  # on a one-switch lane both directions share the one meter
        kbps = max(1, int(lane.rate_mbps * 1000))
        for dpid in {hops[0].dpid, hops[-1].dpid}:
            band = parser.OFPMeterBandDrop(rate=kbps, burst_size=0)
            out[dpid].append(
                parser.OFPMeterMod(None, command=meter_command, flags=ofp.OFPMF_KBPS, meter_id=meter, bands=[band])
            )
    for i, hop in enumerate(hops):
        for pair in pairs if topo.switch(hop.switch).caps.features.masked_ports else exact:
            family_nat = nat_ip if pair.version == 4 else None
            compile_hop(lane, topo, host, hops, i, pair, family_nat, priority, hard, meter, with_ct, out)
    if with_ct:
        border = hops[-1]  # the meter before the commit flows that use it
        out[border.dpid].append(ctlane.newconn_meter(lane.lane_id, _border_ct_new_per_s(topo), newconn_command))
        for version in sorted({p.version for p in pairs}):
            family_nat = nat_ip if version == 4 else None
            out[border.dpid] += ctlane.commit_flows(
                lane.lane_id,
                version,
                ctlane.zone_for(topo, host, family_nat),
                family_nat,
                ctlane.untranslated_egress(topo, host, border.out_port),
                hard,
            )
            for state in (conntrack.REPLY_ESTABLISHED, conntrack.REPLY_RELATED):
                ct_match = {
                    "in_port": border.out_port,
                    "eth_type": ETH_TYPE[version],
                    "ct_state": state,
                    "ct_mark": lane.lane_id,
                }
                out[border.dpid].append(
                    lane_flow(
                        lane,
                        PRIORITY_LANE,
                        hard,
                        ct_match,
                        deliver_to_host(topo, host, hops, len(hops) - 1, version),
                        None,
                        table_id=conntrack.CT_TABLE,
                    )
                )
    return out


def compile_desired(topo: Topology, lanes: Iterable[LaneSpec], now: float) -> tuple[dict[int, OFMsgs], dict[int, str]]:
    """All the app's messages that should be on the switches now: base flows, every live
    lane, and the shared flows of the addresses live lanes use. Lanes that cannot be built
    (expired, no path, bad field) come back as lane_id -> reason instead of failing the rest; reconcile compares the flows with ``flow_key``."""
    out = compile_base(topo)
    refused: dict[int, str] = {}
    carried = []
    for lane in lanes:
        try:
            ofmsgs = compile_lane(lane, topo, now)
        except Exception as exc:
            refused[lane.lane_id] = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            continue
        carried.append(lane)
        for dpid, msgs in ofmsgs.items():
            out.setdefault(dpid, []).extend(msgs)
    for dpid, msgs in compile_shared(topo, carried).items():
        out.setdefault(dpid, []).extend(msgs)
    return out, refused


__all__ = [
    "PRIORITY_TABLE_MISS",
    "PRIORITY_BYPASS_DROP",
    "PRIORITY_ARP_PROXY",
    "PRIORITY_LANE",
    "PRIORITY_ARP_REPLY",
    "PRIORITY_GUARD",
    "PRIORITY_RELATED",
    "PRIORITY_CT_POOL_DROP",
    "PRIORITY_CT_EGRESS",
    "APP_COOKIE",
    "APP_COOKIE_MASK",
    "BASE_COOKIE",
    "ALL_APP_FLOWS",
    "ALL_LANE_FLOWS",
    "LaneCompileError",
    "NoLanePath",
    "compile_base",
    "compile_lane",
    "compile_lane_removal",
    "lane_cookie",
    "lane_id_from_cookie",
    "lane_pool_arp_reply",
    "flow_key",
    "flow_key_of",
    "lane_dpids",
    "lane_ingress_ports",
    "lane_hops",
    "hard_timeout_for",
    "meter_id_for",
    "compile_desired",
    "compile_flow_delete",
    "lane_match",
    "flows_per_lane",
]
