"""Router MACs only from their own ports (issue 28 item 7, its layer-2 half): a host sending
frames with the firewall's MAC as source would move that MAC, and the desktop's gateway
traffic, to its own port by the switches' MAC learning. Simulator over the compiled flows."""

from __future__ import annotations

import pytest

from tests.support.flowsim import make_packet
from tests.support.netsim import Network
from tests.support.paths import DUALSTACK_YAML, REPO
from viplanes.controller.compile import macguard
from viplanes.controller.compile.lane import compile_base
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import PortRef, Topology

TOPOLOGIES = {"campus": REPO / "topologies" / "campus.yaml", "campus-dualstack": DUALSTACK_YAML}


def frame(src: str, **fields: object) -> dict:
    """Any non-IP frame (local experimental EtherType 2: the first one is the cabling probe's)."""
    return make_packet(eth_src=src, eth_dst="ff:ff:ff:ff:ff:ff", eth_type=0x88B6, **fields)


def fate(net: Network, at: PortRef, pkt: dict) -> str:
    kinds = {o.kind for o in net.inject(at, pkt)}
    assert len(kinds) == 1, kinds
    return kinds.pop()


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_a_host_cannot_send_as_a_router(name: str) -> None:
    topo: Topology = load_topology(TOPOLOGIES[name])
    net = Network(topo)
    net.install(compile_base(topo))
    routers = macguard.router_macs(topo)
    assert len(routers) == 5  # fw in/out, nat in/out, edge inside
    hosts = [h.iface.attach for h in topo.hosts if h.role != "cloud" and h.iface.attach]
    for mac, owner in routers.items():
        for port in hosts + [p for p in routers.values() if p is not None and p != owner]:
            assert fate(net, port, frame(mac)) == "drop", (mac, port)
        if owner is not None:
            assert fate(net, owner, frame(mac)) == "NORMAL", (mac, owner)
    for at in hosts:  # a host's own MAC keeps the campus path
        host = next(h for h in topo.hosts if h.iface.attach == at)
        assert fate(net, at, frame(host.iface.mac)) == "NORMAL"
    assert fate(net, PortRef("s1", 3), frame(topo.middleboxes[0].inside.mac)) == "NORMAL"  # trunk


def test_the_border_still_punts_the_edges_arp(dual: Topology) -> None:
    """The guard is drops only: the edge's ARP for a lane address still reaches the controller."""
    net = Network(dual)
    net.install(compile_base(dual))
    arp = make_packet(
        eth_src=dual.edge.inside.mac,
        eth_dst="ff:ff:ff:ff:ff:ff",
        eth_type=0x0806,
        arp_op=1,
        arp_spa="198.51.100.1",
        arp_tpa="198.51.100.200",
    )
    assert [o.kind for o in net.send_from_edge(arp)] == ["CONTROLLER"]
