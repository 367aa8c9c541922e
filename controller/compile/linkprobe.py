"""The flows and the packet-out of the cabling probes (``runtime/probeframe.py`` builds the
frames, ``runtime/verify.py`` judges what comes back). Pure (``datapath=None``).

On every switch, a probe frame (``ETH_TYPE_PROBE``) that arrives on a port of a declared
inter-switch link goes to the controller; one that arrives anywhere else (a host's port, a
middlebox leg, a port the topology does not know) is dropped, so a campus host cannot put a
frame in front of the verifier at all. Both sit above the guards and the bypass drop (the
probes must cross bypass ports, which drop everything no lane takes) and below the lanes,
whose matches never take a probe (they match IP).

The probe's EtherType is 0x88B5 (IEEE 802 "local experimental"), not LLDP's 0x88CC: a campus
switch or server running an LLDP agent sends real LLDP on the same links, and those frames
must neither reach the controller nor be mistaken for ours. Its destination is the LLDP
"nearest bridge" group 01:80:c2:00:00:0e, which 802.1D bridges never forward (OVS's NORMAL
drops it unless ``forward-bpdu`` is set): a probe that reaches a switch before its punt flow is
installed ends there instead of being flooded through the campus.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.bands import PRIORITY_PROBE, PRIORITY_PROBE_DROP, OFMsgs, flow
from viplanes.controller.compile.cookies import BASE_COOKIE
from viplanes.topologies.model import Topology

ETH_TYPE_PROBE = 0x88B5
PROBE_DST = "01:80:c2:00:00:0e"


def link_ports(topo: Topology, switch: str) -> list[int]:
    """The switch's ports that end a declared inter-switch link, sorted."""
    ports = {end.port for link in topo.links for end in (link.a, link.b) if end.switch == switch}
    return sorted(ports)


def probe_flows(topo: Topology, switch: str) -> OFMsgs:
    """Probes on the switch's declared link ports to the controller; every other probe dropped."""
    to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
    ofmsgs: OFMsgs = [
        flow(PRIORITY_PROBE, BASE_COOKIE, parser.OFPMatch(in_port=port, eth_type=ETH_TYPE_PROBE), to_controller)
        for port in link_ports(topo, switch)
    ]
    ofmsgs.append(flow(PRIORITY_PROBE_DROP, BASE_COOKIE, parser.OFPMatch(eth_type=ETH_TYPE_PROBE), []))
    return ofmsgs


def probe_out(port: int, frame: bytes) -> Any:
    """A packet-out sending ``frame`` straight out of ``port`` (no flow table on the way)."""
    return parser.OFPPacketOut(
        None,
        buffer_id=ofp.OFP_NO_BUFFER,
        in_port=ofp.OFPP_CONTROLLER,
        actions=[parser.OFPActionOutput(port)],
        data=frame,
    )
