"""Answer ARP for active lane-pool addresses, so the edge router can send return traffic to them.

Pure bytes in, bytes out: the os-ken glue hands over a punted frame and sends back what we return.
Anything that is not a well-formed ARP request for an active lane address gets no answer.

Only the ARP header is ever parsed. os-ken's ``packet.Packet`` follows the ethertype into every
protocol it knows, and some of those parsers never end on hostile bytes (os-ken 4.2.2: a TCP
option of unknown kind and length 0 is parsed again and again, growing a list until memory runs
out). The switches punt only ARP to us, but a switch that lies could send any frame.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from os_ken.lib.packet import arp, ether_types, ethernet, packet

from viplanes.topologies.model import Topology

ETH_HEADER = 14
ARP_BODY = 28


def lane_pool_arp_reply(
    topo: Topology, active_nat_ips: Iterable[str | ipaddress.IPv4Address], eth_frame: bytes
) -> bytes | None:
    """The ARP reply frame (from the lane pool's MAC) for a request asking for an active lane
    address; None for anything else, including malformed frames (never raises)."""
    try:
        if not isinstance(eth_frame, (bytes, bytearray)) or len(eth_frame) < ETH_HEADER + ARP_BODY:
            return None
        frame = bytes(eth_frame)
        if int.from_bytes(frame[12:14], "big") != ether_types.ETH_TYPE_ARP:
            return None  # never hand anything else to os-ken's protocol parsers
        req = arp.arp.parser(frame[ETH_HEADER : ETH_HEADER + ARP_BODY])[0]
        if (
            req.opcode != arp.ARP_REQUEST
            or req.hwtype != arp.ARP_HW_TYPE_ETHERNET
            or req.proto != ether_types.ETH_TYPE_IP
            or req.hlen != 6
            or req.plen != 4
        ):
            return None
        wanted = ipaddress.IPv4Address(req.dst_ip)
        active = {ipaddress.IPv4Address(ip) for ip in active_nat_ips}
        if wanted not in active or wanted not in topo.lane_pool.prefix:
            return None
        pool_mac = topo.lane_pool.mac
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(dst=req.src_mac, src=pool_mac, ethertype=ether_types.ETH_TYPE_ARP))
        reply.add_protocol(
            arp.arp(opcode=arp.ARP_REPLY, src_mac=pool_mac, src_ip=str(wanted), dst_mac=req.src_mac, dst_ip=req.src_ip)
        )
        reply.serialize()
        return bytes(reply.data)
    except Exception:
        return None
