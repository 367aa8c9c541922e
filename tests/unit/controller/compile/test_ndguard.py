"""IPv6 first-hop security (issue 28 item 7) through the simulated flow tables of the dual-stack
campus: each attack the lab reproduced (a host's NA/NS for the desktop's gateway, the DTN's NA
for the NAT box's address, RAs and redirects from a host, RFC 7113's hidden header chain) is
dropped at the port it enters, and the ND the campus needs (resolution, DAD, the routers' own
advertisements) still reaches NORMAL."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import make_packet
from tests.support.netsim import Network
from viplanes.controller.compile import ndguard
from viplanes.controller.compile.lane import compile_base
from viplanes.topologies.model import PortRef, Topology

RA, NS, NA, REDIRECT = 134, 135, 136, 137
GW6 = "2001:db8:1::1"  # the desktop's gateway: the firewall's inside leg (s2:2)
NAT6 = "2001:db8:3::2"  # the NAT box's outside leg (s3:1), the edge's next hop back to the campus
EDGE6 = "2001:db8:3::1"
DESKTOP6, DTN6 = "2001:db8:1::10", "2001:db8:3::30"
FREE = PortRef("s1", 9)  # a port the topology does not know


@pytest.fixture(scope="module")
def dnet(dual: Topology) -> Network:
    network = Network(dual)
    network.install(compile_base(dual))
    return network


def nd(mac: str, src: str, dst: str, icmp_type: int, target: str | None = None) -> dict[str, Any]:
    return make_packet(
        eth_src=mac,
        eth_dst="33:33:00:00:00:01",
        eth_type=0x86DD,
        ip_proto=58,
        ipv6_src=src,
        ipv6_dst=dst,
        icmpv6_type=icmp_type,
        ipv6_nd_target=target,
    )


def fate(net: Network, at: PortRef, pkt: dict[str, Any]) -> str:
    """'drop' or 'NORMAL' at the switch the packet enters (ND is link-local: NORMAL carries it)."""
    kinds = {o.kind for o in net.inject(at, pkt)}
    assert len(kinds) == 1, kinds
    return kinds.pop()


def port_of(topo: Topology, host: str) -> PortRef:
    attach = topo.host(host).iface.attach
    assert attach is not None
    return attach


def ll(mac: str) -> str:
    return ndguard.eui64_link_local(mac)


def test_eui64_link_local_is_what_linux_derives() -> None:
    assert ll("02:00:00:01:00:20") == "fe80::ff:fe01:20"  # as `ovs-appctl ofproto/trace` saw it in the lab


def test_a_host_claiming_the_gateway_is_dropped(dual: Topology, dnet: Network) -> None:
    server = port_of(dual, "server")
    mac = str(dual.host("server").iface.mac)
    attacks = {
        "NA for the gateway": nd(mac, ll(mac), DESKTOP6, NA, GW6),
        "NA from the gateway's address": nd(mac, GW6, DESKTOP6, NA, ll(mac)),  # host rules
        "NS from the gateway's address": nd(mac, GW6, DESKTOP6, NS, DESKTOP6),
        "NA for the gateway's link-local": nd(mac, ll(mac), DESKTOP6, NA, ll(dual.middleboxes[0].inside.mac)),
    }
    for what, pkt in attacks.items():
        assert fate(dnet, server, pkt) == "drop", what
        assert fate(dnet, port_of(dual, "desktop"), pkt) == "drop", f"{what} (the desktop itself)"
        if what != "NA from the gateway's address":  # binds nothing; unknown ports have no host rules
            assert fate(dnet, FREE, pkt) == "drop", f"{what} (unknown port)"


def test_the_gateway_still_advertises_itself(dual: Topology, dnet: Network) -> None:
    fw = dual.middleboxes[0].inside
    assert fw.attach is not None
    mac = str(fw.mac)
    for pkt in (
        nd(mac, GW6, DESKTOP6, NA, GW6),
        nd(mac, ll(mac), DESKTOP6, NA, GW6),
        nd(mac, GW6, "ff02::1:ff00:10", NS, DESKTOP6),
        nd(mac, ll(mac), "ff02::1", RA),
    ):
        assert fate(dnet, fw.attach, pkt) == "NORMAL", pkt
        # ...and across the trunk to the desktop's access switch
        assert fate(dnet, PortRef("s1", 3), pkt) == "NORMAL", pkt


def test_the_dtn_cannot_claim_the_nat_box_or_the_edge(dual: Topology, dnet: Network) -> None:
    dtn, mac = port_of(dual, "dtn"), str(dual.host("dtn").iface.mac)
    for target in (NAT6, EDGE6, ll(dual.middleboxes[1].outside.mac)):
        assert fate(dnet, dtn, nd(mac, ll(mac), EDGE6, NA, target)) == "drop", target
    nat = dual.middleboxes[1].outside
    assert nat.attach is not None
    assert fate(dnet, nat.attach, nd(str(nat.mac), NAT6, EDGE6, NA, NAT6)) == "NORMAL"
    # the DTN advertising itself, resolving the edge, and its duplicate address detection
    assert fate(dnet, dtn, nd(mac, DTN6, EDGE6, NA, DTN6)) == "NORMAL"
    assert fate(dnet, dtn, nd(mac, DTN6, "ff02::1:ff00:1", NS, EDGE6)) == "NORMAL"
    assert fate(dnet, dtn, nd(mac, "::", "ff02::1:ff00:30", NS, DTN6)) == "NORMAL"


def test_a_host_may_claim_only_its_own_addresses(dual: Topology, dnet: Network) -> None:
    desktop, mac = port_of(dual, "desktop"), str(dual.host("desktop").iface.mac)
    assert fate(dnet, desktop, nd(mac, DESKTOP6, GW6, NA, DESKTOP6)) == "NORMAL"
    assert fate(dnet, desktop, nd(mac, ll(mac), GW6, NA, ll(mac))) == "NORMAL"
    assert fate(dnet, desktop, nd(mac, "::", "ff02::1:ff00:10", NS, DESKTOP6)) == "NORMAL"  # DAD
    # an address of the subnet nobody in the topology holds, and another host's
    for src, target in (("2001:db8:1::99", "2001:db8:1::99"), (ll(mac), "2001:db8:1::99"), (ll(mac), DTN6)):
        assert fate(dnet, desktop, nd(mac, src, GW6, NA, target)) == "drop", (src, target)
    assert fate(dnet, desktop, nd(mac, "2001:db8:1::99", "ff02::1:ff00:1", NS, GW6)) == "drop"
    # the server has no v6 address: link-local only
    server, smac = port_of(dual, "server"), str(dual.host("server").iface.mac)
    assert fate(dnet, server, nd(smac, ll(smac), "ff02::1:ff00:1", NS, GW6)) == "NORMAL"
    assert fate(dnet, server, nd(smac, "2001:db8:1::20", "ff02::1:ff00:1", NS, GW6)) == "drop"


@pytest.mark.parametrize("icmp_type", [RA, REDIRECT])
def test_router_messages_only_from_router_ports(dual: Topology, dnet: Network, icmp_type: int) -> None:
    mac = str(dual.host("server").iface.mac)
    spoof = nd(mac, ll(mac), "ff02::1", icmp_type, DESKTOP6 if icmp_type == REDIRECT else None)
    for at in (port_of(dual, "server"), port_of(dual, "desktop"), port_of(dual, "dtn"), FREE, PortRef("s2", 3)):
        assert fate(dnet, at, spoof) == "drop", at  # s2:3 is the bypass: it carries lanes only
    for leg in ndguard.router_ports(dual):
        assert fate(dnet, leg, spoof) == "NORMAL", leg


def test_a_header_chain_ovs_could_not_walk_is_dropped(dual: Topology, dnet: Network) -> None:
    """RFC 7113: the RA's ICMPv6 header in the second fragment. OVS reports such a first
    fragment with ip_proto 0 (seen with ofproto/trace on OVS 3.1); without it the receiver
    cannot reassemble the RA."""
    mac = str(dual.host("server").iface.mac)
    hidden = make_packet(eth_src=mac, eth_dst="33:33:00:00:00:01", eth_type=0x86DD, ip_proto=0, ipv6_src=ll(mac))
    for at in (port_of(dual, "server"), FREE):
        assert fate(dnet, at, hidden) == "drop"


def test_other_icmpv6_keeps_the_normal_path(dual: Topology, dnet: Network) -> None:
    mac = str(dual.host("desktop").iface.mac)
    for icmp_type in (128, 133, 143):  # echo request, router solicitation, MLDv2 report
        pkt = nd(mac, DESKTOP6, "ff02::2", icmp_type)
        assert fate(dnet, port_of(dual, "desktop"), pkt) == "NORMAL", icmp_type


def test_a_gateway_no_device_holds_is_guarded_on_host_ports(dual: Topology) -> None:
    """A gateway6 that is no leg's address (a VRRP address, say) has no known port: claims of it
    are dropped on the campus hosts' ports and left alone elsewhere."""
    vrrp = "2001:db8:1::fe"
    desktop = dual.host("desktop")
    hosts = tuple(replace(h, gateway6=ipaddress.IPv6Address(vrrp)) if h is desktop else h for h in dual.hosts)
    topo = replace(dual, hosts=hosts)
    net = Network(topo)
    net.install(compile_base(topo))
    mac = "02:00:00:00:00:99"
    claim = nd(mac, "fe80::99", DESKTOP6, NA, vrrp)
    assert fate(net, port_of(topo, "server"), claim) == "drop"
    assert fate(net, FREE, claim) == "NORMAL"


def test_a_v4_only_campus_gets_the_ra_guard_only(topo: Topology) -> None:
    """No v6 addresses to protect: RA/redirect guard and the unwalked-chain drop, a few flows."""
    base = compile_base(topo)
    flows = [m for msgs in base.values() for m in msgs if isinstance(m, parser.OFPFlowMod)]
    nd_flows = [m for m in flows if ndguard.PRIORITY_RA_DROP <= m.priority <= ndguard.PRIORITY_ND_TRUSTED]
    assert {m.priority for m in nd_flows} == {ndguard.PRIORITY_ND_TRUSTED, ndguard.PRIORITY_RA_DROP}
    net = Network(topo)
    net.install(base)
    mac = str(topo.host("server").iface.mac)
    assert fate(net, port_of(topo, "server"), nd(mac, ll(mac), "ff02::1", RA)) == "drop"
