"""Guards on ports the topology does not know (an attacker plugging into a free port of an
access switch), ARP claiming a campus host's address from another port, frames that are not
IPv4 carrying the lane MAC, and non-first IPv4 fragments of a lane's flow: none rides a lane or
leaves with a lane identity. Simulator (flowsim/netsim) over the compiled flows."""

from __future__ import annotations

from tests.support.flowsim import ip_packet, make_packet
from viplanes.topologies.model import PortRef

CLOUD = "203.0.113.10"
NAT_IP = "198.51.100.200"
FREE_PORT = PortRef("s1", 9)  # on the desktop's access switch, in no link and no attachment


def kinds(outcomes) -> list[str]:
    return sorted(o.kind for o in outcomes)


def test_a_free_port_cannot_use_the_lane_mac_or_the_pool(topo, net) -> None:
    assert topo.switch("s1") and all(p != FREE_PORT for p in net.behind)
    gw = topo.middleboxes[0].inside.mac
    lane_mac, desktop = topo.lane_pool.mac, topo.host("desktop").iface
    forged = {
        "ipv4 with the lane MAC": ip_packet(lane_mac, gw, "10.1.0.10", CLOUD, "tcp", 40000, 5201),
        "ipv6 with the lane MAC": make_packet(eth_src=lane_mac, eth_dst=gw, eth_type=0x86DD),
        "non-IP with the lane MAC": make_packet(eth_src=lane_mac, eth_dst=gw, eth_type=0x88B6),
        "ipv4 from the pool": ip_packet("02:00:00:00:00:99", gw, NAT_IP, CLOUD, "tcp", 40000, 5201),
        "ARP for a pool address": make_packet(
            eth_src="02:00:00:00:00:99",
            eth_dst="ff:ff:ff:ff:ff:ff",
            eth_type=0x0806,
            arp_op=2,
            arp_spa=NAT_IP,
            arp_sha="02:00:00:00:00:99",
        ),
        "ARP with the lane MAC": make_packet(
            eth_src="02:00:00:00:00:99",
            eth_dst="ff:ff:ff:ff:ff:ff",
            eth_type=0x0806,
            arp_op=2,
            arp_spa="10.1.0.99",
            arp_sha=lane_mac,
        ),
    }
    for what, pkt in forged.items():
        assert kinds(net.inject(FREE_PORT, pkt)) == ["drop"], what
    # the lane's exact tuple with the desktop's own MAC and address: not the lane (its rules pin
    # the desktop's port), only the campus path any host gets
    spoof = ip_packet(str(desktop.mac), gw, "10.1.0.10", CLOUD, "tcp", 40000, 5201)
    assert kinds(net.inject(FREE_PORT, spoof)) == ["NORMAL"]
    assert kinds(net.send_from_host("desktop", spoof)) == ["edge"]  # ...which the desktop has


def test_arp_claiming_a_campus_host_is_dropped_off_its_own_port(topo, net) -> None:
    desktop, dtn = topo.host("desktop").iface, topo.host("dtn").iface
    claim = make_packet(
        eth_src=str(dtn.mac),
        eth_dst="ff:ff:ff:ff:ff:ff",
        eth_type=0x0806,
        arp_op=2,
        arp_spa=str(desktop.ip.ip),
        arp_sha=str(dtn.mac),
    )
    assert kinds(net.send_from_host("dtn", claim)) == ["drop"]
    assert kinds(net.send_from_host("dtn", dict(claim, arp_spa=str(dtn.ip.ip)))) == ["NORMAL"]
    own = dict(claim, eth_src=str(desktop.mac), arp_sha=str(desktop.mac))
    assert kinds(net.send_from_host("desktop", own)) == ["NORMAL"]


def test_non_first_fragments_of_a_lane_flow_do_not_ride_it(topo, net) -> None:
    """OVS (frag handling "normal") gives a later fragment no L4 ports; lane rules match ports,
    so it takes the campus path like any host's packet, never the lane."""
    desktop = topo.host("desktop").iface
    gw = topo.middleboxes[0].inside.mac
    later = make_packet(
        eth_src=str(desktop.mac), eth_dst=gw, eth_type=0x0800, ip_proto=6, ipv4_src="10.1.0.10", ipv4_dst=CLOUD
    )
    assert kinds(net.send_from_host("desktop", later)) == ["NORMAL"]
