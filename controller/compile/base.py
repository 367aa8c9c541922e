"""The app's base flows: what every switch holds whatever lanes exist. Pure (``datapath=None``).

Bands (table 0 unless said otherwise), lowest first:

- ``PRIORITY_TABLE_MISS`` (0): NORMAL, the campus's default L2 path through firewall and NAT.
- ``PRIORITY_BYPASS_DROP`` (100): drop whatever arrives on a bypass port and no lane matched.
  OpenFlow 1.3 has no port ``NO_FLOOD`` config, so NORMAL may still flood a broadcast out of a
  bypass port; the far end's drop rule stops it there.
- ``PRIORITY_ARP_PROXY`` (200): at the border switch, ARP requests for lane-pool addresses go to
  the controller, through a packets-per-second meter (``ARP_PUNT_METER``): only a fallback for
  the switch-side ARP replies below, and never a flood of PACKET_INs.
- ``PRIORITY_ARP_REPLY`` (300): shared per-address flows at the border switch that turn the
  edge router's ARP request for an active lane address into the reply (``sharedflows``).
- ``PRIORITY_GUARD`` (900): on every switch, drop frames with the lane MAC as source; on every
  campus switch (not those beyond the edge router, where lane addresses are legitimate
  sources) also IPv4 from lane-pool addresses and ARP claiming a lane-pool address or the lane
  MAC. And on every host-facing port (hosts, middlebox legs, the edge router's inside leg), IPv4
  from a campus host's address, and ARP with it as sender address, that is not attached there
  (its IPv6 address and neighbour advertisements for it on the other hosts' ports):
  a lane source is refused as a source anywhere but its own port (a source guard from the
  topology; ports the topology does not know are covered by the lane-pool and marker guards,
  which match on every port, and cannot ride a lane since every lane flow pins its ingress
  ``in_port``). Lane rules sit above
  and always pin ``in_port``, so only a packet that passed its lane's own ingress check can
  carry the lane marker or a lane address past any switch. One flow each, whatever the hosts
  and ports (ports missing from the topology are covered too).
- ``PRIORITY_RELATED`` (950, border switch with conntrack): ICMP destination-unreachable and
  time-exceeded from the edge go through conntrack (table 1), so errors that belong to a lane
  connection (fragmentation needed) reach the host with their inner header un-NATed. On a
  dual-stack edge, ICMPv6 destination-unreachable / packet-too-big / time-exceeded likewise
  (``+rel`` of a v6 lane connection, no NAT); neighbour discovery is not matched here. These
  look up the deployment's first zone (``ZoneLayout.related``), where no lane commits: an error for a lane address (a pool
  address, or a host's own address of untranslated lanes) goes through that address's own zone
  instead (``PRIORITY_RELATED_NAT``, 951, a shared flow of the address: ``sharedflows``).
  Neighbour discovery is never steered (lanes are tcp/udp); what may claim or route is checked
  by the RA guard and ND inspection (``ndguard``, 850-890), then NORMAL; a router leg's MAC as
  source from another host-facing port is dropped (``macguard``, 895).
- ``PRIORITY_PROBE_DROP`` / ``PRIORITY_PROBE`` (960 / 970, every switch): cabling probes
  (EtherType 0x88B5) on a declared inter-switch link port go to the controller, anywhere else
  they are dropped (``linkprobe``).
- ``PRIORITY_LANE`` (1000, +1 when the source port is pinned): the lanes (``compiler``).

Table 1 (border switch with conntrack; packets arrive there only after ``ct(nat, table=1)``):
per-lane flows for ``+est+rpl`` / ``+rel+rpl`` replies marked with the lane id (``PRIORITY_LANE``),
``PRIORITY_CT_POOL_DROP`` (100) drops anything else for a lane-pool address and anything sent
to the lane MAC (a reply an ended lane's stale entry un-NATed), and the table-miss
(0) hands the rest to NORMAL: a reply that is no lane's gets what it would get without lanes.

Table 3 (border switch with conntrack): a conntrack lane's outbound packets after their
uncommitted lookup; per-lane commit flows (``ctlane``: ``+new`` through the lane's
new-connection meter), and the table-miss drops what none takes (invalid packets).

Table 2 (border switch with conntrack; a NAT'd lane's outbound packet arrives there after its
``ct(commit, nat, table=2)``): ``PRIORITY_CT_EGRESS`` (100) sends a tracked, valid packet whose
source is now a lane address to the edge (lane MAC, edge MAC); the table-miss (0) drops the rest,
above all a packet conntrack found invalid, which it neither committed nor translated (TCP
SYN+FIN, a bare FIN, a SYN-ACK that opens nothing): before, those left the campus on the lane
with the host's private address.
"""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import conntrack
from viplanes.controller.compile.bands import (  # noqa: F401 - re-exported: the bands' usual import path
    ARP_PUNT_METER,
    ARP_PUNT_PPS,
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    ICMP_ERRORS,
    ICMPV6_ERRORS,
    IP_PROTO_ICMP,
    IP_PROTO_ICMPV6,
    PRIORITY_ARP_PROXY,
    PRIORITY_ARP_REPLY,
    PRIORITY_BYPASS_DROP,
    PRIORITY_CT_EGRESS,
    PRIORITY_CT_POOL_DROP,
    PRIORITY_GUARD,
    PRIORITY_LANE,
    PRIORITY_POOL_DROP,
    PRIORITY_RELATED,
    PRIORITY_RELATED_NAT,
    PRIORITY_TABLE_MISS,
    OFMsgs,
    flow,
)
from viplanes.controller.compile.cookies import BASE_COOKIE
from viplanes.controller.compile.hostguard import host_source_guards
from viplanes.controller.compile.linkprobe import probe_flows
from viplanes.controller.compile.macguard import mac_guard_flows
from viplanes.controller.compile.ndguard import nd_guard_flows
from viplanes.topologies.model import Switch, Topology
from viplanes.topologies.paths import bypass_ports


def dual_stack(topo: Topology) -> bool:
    """The edge router routes IPv6 (so v6 lanes, and their ICMPv6 errors, exist)."""
    return topo.edge.inside.ip6 is not None


def border_switch(topo: Topology) -> Switch | None:
    """Where the edge router's inside leg attaches: every lane ends there."""
    at = topo.edge.inside.attach
    return topo.switch(at.switch) if at else None


def _pool(topo: Topology) -> tuple[str, str]:
    net = topo.lane_pool.prefix
    return str(net.network_address), str(net.netmask)


def outside_switches(topo: Topology) -> set[str]:
    """Switches beyond the edge router: those linked (directly or not) to its outside leg's
    switch but not to its inside leg's. There, lane-pool addresses are ordinary sources."""
    out_at, in_at = topo.edge.outside.attach, topo.edge.inside.attach
    if out_at is None:
        return set()
    seen, todo = {out_at.switch}, [out_at.switch]
    while todo:
        here = todo.pop()
        for link in topo.links:
            for a, b in ((link.a, link.b), (link.b, link.a)):
                if a.switch == here and b.switch not in seen:
                    seen.add(b.switch)
                    todo.append(b.switch)
    return set() if in_at is not None and in_at.switch in seen else seen


def guard_flows(topo: Topology, outside: bool = False) -> OFMsgs:
    """The source guards of one switch (see the module docstring)."""
    pool, lane_mac = _pool(topo), topo.lane_pool.mac
    matches = [parser.OFPMatch(eth_src=lane_mac)]
    if not outside:
        matches += [
            parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ipv4_src=pool),
            parser.OFPMatch(eth_type=ETH_TYPE_ARP, arp_spa=pool),
            parser.OFPMatch(eth_type=ETH_TYPE_ARP, arp_sha=lane_mac),
        ]
    return [flow(PRIORITY_GUARD, BASE_COOKIE, m, []) for m in matches]


def _arp_punt(pool: tuple[str, str], meters: bool) -> OFMsgs:
    """ARP for a lane-pool address no reply flow answered: to the controller through a meter.
    A switch without meters (its profile, docs/hardware.md) drops it instead: an unmetered punt
    would let anyone on the edge link flood the controller. The per-address reply flows, which
    answer every live lane's address on the switch itself, are unaffected."""
    match = parser.OFPMatch(eth_type=ETH_TYPE_ARP, arp_op=1, arp_tpa=pool)
    if not meters:
        return [flow(PRIORITY_ARP_PROXY, BASE_COOKIE, match, [])]
    band = parser.OFPMeterBandDrop(rate=ARP_PUNT_PPS, burst_size=ARP_PUNT_PPS)
    return [
        parser.OFPMeterMod(
            None, command=ofp.OFPMC_ADD, flags=ofp.OFPMF_PKTPS | ofp.OFPMF_BURST, meter_id=ARP_PUNT_METER, bands=[band]
        ),
        flow(
            PRIORITY_ARP_PROXY,
            BASE_COOKIE,
            match,
            [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)],
            meter=ARP_PUNT_METER,
        ),
    ]


def _border_flows(topo: Topology, sw: Switch) -> OFMsgs:
    at = topo.edge.inside.attach
    assert at is not None, "the border switch is where the edge's inside leg attaches"
    edge_port = at.port
    pool = _pool(topo)
    ofmsgs: OFMsgs = _arp_punt(pool, sw.caps.features.meters) + [
        # Anything from the internet for a lane address that no lane's reverse rule (or the
        # related-ICMP rule) took: a probe, another port, a later fragment. NORMAL would flood it
        # (no switch ever learns the lane MAC) to the NAT box, the DTN and the bypass.
        flow(
            PRIORITY_POOL_DROP,
            BASE_COOKIE,
            parser.OFPMatch(in_port=edge_port, eth_type=ETH_TYPE_IPV4, ipv4_dst=pool),
            [],
        ),
    ]
    if sw.conntrack:
        related_zone = topo.ct_zone_base  # ZoneLayout.related: the deployment's first zone
        for icmp_type in ICMP_ERRORS:
            ofmsgs.append(
                flow(
                    PRIORITY_RELATED,
                    BASE_COOKIE,
                    parser.OFPMatch(
                        in_port=edge_port, eth_type=ETH_TYPE_IPV4, ip_proto=IP_PROTO_ICMP, icmpv4_type=icmp_type
                    ),
                    [conntrack.track_reply(related_zone)],
                )
            )
        if dual_stack(topo):
            for icmp_type in ICMPV6_ERRORS:
                ofmsgs.append(
                    flow(
                        PRIORITY_RELATED,
                        BASE_COOKIE,
                        parser.OFPMatch(
                            in_port=edge_port, eth_type=ETH_TYPE_IPV6, ip_proto=IP_PROTO_ICMPV6, icmpv6_type=icmp_type
                        ),
                        [conntrack.track_reply(related_zone)],
                    )
                )
        ofmsgs.append(
            flow(
                PRIORITY_CT_POOL_DROP,
                BASE_COOKIE,
                parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ipv4_dst=pool),
                [],
                table_id=conntrack.CT_TABLE,
            )
        )
        # Sent to a lane address (the edge reaches those at the lane MAC) but un-NATed by an
        # entry no live lane claims (its lane ended; entries outlive lanes): NORMAL would flood
        # another host's old replies, with its private address, to every port of the border.
        ofmsgs.append(
            flow(
                PRIORITY_CT_POOL_DROP,
                BASE_COOKIE,
                parser.OFPMatch(eth_dst=topo.lane_pool.mac),
                [],
                table_id=conntrack.CT_TABLE,
            )
        )
        ofmsgs.append(
            flow(
                PRIORITY_TABLE_MISS,
                BASE_COOKIE,
                parser.OFPMatch(),
                [parser.OFPActionOutput(ofp.OFPP_NORMAL)],
                table_id=conntrack.CT_TABLE,
            )
        )
        # Egress of NAT'd lanes (after their commit): only a packet conntrack tracked and
        # translated to a lane address leaves for the edge; one it found invalid kept the
        # host's private address and is dropped by the table-miss (conntrack.CT_EGRESS_TABLE).
        ofmsgs.append(
            flow(
                PRIORITY_CT_EGRESS,
                BASE_COOKIE,
                parser.OFPMatch(
                    eth_type=ETH_TYPE_IPV4,
                    ipv4_src=pool,
                    ct_state=conntrack.ct_state(conntrack.CT_TRK, conntrack.CT_INV),
                ),
                [
                    parser.OFPActionSetField(eth_src=topo.lane_pool.mac),
                    parser.OFPActionSetField(eth_dst=topo.edge.inside.mac),
                    parser.OFPActionOutput(edge_port),
                ],
                table_id=conntrack.CT_EGRESS_TABLE,
            )
        )
        ofmsgs.append(flow(PRIORITY_TABLE_MISS, BASE_COOKIE, parser.OFPMatch(), [], table_id=conntrack.CT_EGRESS_TABLE))
        # Lanes' commit table (``ctlane``): what no lane's commit flow takes (+inv) is dropped.
        ofmsgs.append(flow(PRIORITY_TABLE_MISS, BASE_COOKIE, parser.OFPMatch(), [], table_id=conntrack.CT_COMMIT_TABLE))
    return ofmsgs


def compile_base(topo: Topology) -> dict[int, OFMsgs]:
    """Per dpid: table-miss NORMAL, drop on bypass ports, the source guards, and at the border
    switch the metered ARP punt and (with conntrack) the reply plumbing of table 1."""
    return {sw.dpid: base_flows(topo, sw) for sw in topo.switches}


def base_flows(topo: Topology, sw: Switch) -> OFMsgs:
    """``compile_base`` of one switch: a switch's reconcile compiles only its own base flows
    (on a campus of many switches, the others' are most of the work)."""
    border = border_switch(topo)
    outside = sw.name in outside_switches(topo)
    ofmsgs: OFMsgs = [
        flow(PRIORITY_TABLE_MISS, BASE_COOKIE, parser.OFPMatch(), [parser.OFPActionOutput(ofp.OFPP_NORMAL)])
    ]
    ofmsgs += [
        flow(PRIORITY_BYPASS_DROP, BASE_COOKIE, parser.OFPMatch(in_port=port), [])
        for port in sorted(bypass_ports(topo).get(sw.dpid, ()))
    ]
    ofmsgs += guard_flows(topo, outside=outside)
    if not outside:
        ofmsgs += host_source_guards(topo, sw.name)
        ofmsgs += nd_guard_flows(topo, sw.name, dual_stack(topo))
        ofmsgs += mac_guard_flows(topo, sw.name)
    if border is not None and sw.name == border.name:
        ofmsgs += _border_flows(topo, sw)
    return ofmsgs + probe_flows(topo, sw.name)
