"""Which flows of the campus run through its NAT: what the acceptor pairs and takes over."""

from __future__ import annotations

from viplanes.domain.sighting import IPAddress
from viplanes.topologies.model import Topology


def nat_outside_addresses(topology: Topology) -> frozenset[IPAddress]:
    """The campus NAT boxes' outside addresses: the sources of post-NAT flows."""
    return frozenset(mb.outside.ip.ip for mb in topology.middleboxes if mb.kind == "nat")


def translated_sources(topology: Topology) -> frozenset[IPAddress]:
    """The hosts whose connections leave through the campus NAT (private IPv4 sources): a lane
    for one of their running connections would change its public address mid-flow."""
    return frozenset(h.iface.ip.ip for h in topology.hosts if h.needs_nat)
