"""Router MACs only from their own ports: the layer-2 half of first-hop security.

The ND guard (``ndguard``) stops a host from claiming a router's address; a host that sends any
frame with the firewall's MAC as its source gets the same result without ND: the switches' MAC
learning (NORMAL) moves that MAC to the host's port, and the desktop's traffic to its gateway,
v4 and v6, goes to the host (seen in the lab: 0 of 3 pings answered after three such frames).

So on every campus switch, each known host-facing port (campus hosts, middlebox legs, the edge
router's inside leg) drops frames whose source is the MAC of a router leg (a middlebox leg or
the edge router's inside leg) it does not belong to (``PRIORITY_MAC_GUARD``, drop only: a
NORMAL exception for the owner would skip the border's ARP punt and pool drop below it). Ports
the topology does not know are not covered (as with the per-host IPv4 guards); host MACs are
not pinned (stealing another host's traffic is the per-host guards' concern and needs no router).
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.cookies import BASE_COOKIE
from viplanes.controller.compile.flowkey import cached_key
from viplanes.topologies.model import PortRef, Topology

PRIORITY_MAC_GUARD = 895  # with the drops of the guard bands, above the ND guard's exceptions

OFMsgs = list[Any]
_KEPT: dict[tuple[int, str], Any] = {}
_KEPT_MAX = 100_000


def router_macs(topo: Topology) -> dict[str, PortRef | None]:
    """Each router leg's MAC (lower case) and its port (None: cabled straight to another node)."""
    legs = [topo.edge.inside] + [leg for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]
    return {leg.mac.lower(): leg.attach for leg in legs}


def facing_ports(topo: Topology, switch: str) -> list[int]:
    """The switch's ports the topology puts a campus host or a router leg behind."""
    ports = {h.iface.attach for h in topo.hosts if h.role != "cloud" and h.iface.attach}
    ports |= {port for port in router_macs(topo).values() if port is not None}
    return sorted(p.port for p in ports if p.switch == switch)


def _drop(port: int, mac: str) -> Any:
    """A copy of the kept drop (every access switch drops the same MACs on the same ports)."""
    kept = _KEPT.get((port, mac))
    if kept is None:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        kept = parser.OFPFlowMod(
            None,
            table_id=0,
            cookie=BASE_COOKIE,
            command=ofp.OFPFC_ADD,
            priority=PRIORITY_MAC_GUARD,
            match=parser.OFPMatch(in_port=port, eth_src=mac),
            instructions=[],
            buffer_id=ofp.OFP_NO_BUFFER,
        )
        cached_key(kept)
        _KEPT[(port, mac)] = kept
    msg = object.__new__(type(kept))
    msg.__dict__.update(kept.__dict__)
    return msg


def mac_guard_flows(topo: Topology, switch: str) -> OFMsgs:
    """Per facing port of the switch, a drop of every router MAC that is not its own."""
    macs = router_macs(topo)
    return [
        _drop(port, mac)
        for port in facing_ports(topo, switch)
        for mac, owner in sorted(macs.items())
        if owner != PortRef(switch, port)
    ]
