"""What a lane must be before it compiles: ports in range, unicast destinations beyond the campus,
an address family the source host has, a lane-pool address where the host needs translation.
Pure; a refusal is a ``LaneCompileError`` naming every problem.
"""

from __future__ import annotations

import ipaddress

from viplanes.controller.compile.path import LaneCompileError
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Host, Topology

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network
IP_PROTO = {"tcp": 6, "udp": 17}


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _is_unicast(net: IPNet) -> bool:
    addr = net.network_address
    if addr.version == 6:
        return not (
            addr.is_multicast or addr.is_unspecified or addr.is_loopback or addr.is_link_local or addr.is_reserved
        )
    return not (
        addr.is_multicast
        or addr.is_unspecified
        or addr.is_loopback
        or addr.is_reserved
        or addr == ipaddress.IPv4Address("255.255.255.255")
    )


def _campus_network_of(topo: Topology, net: IPNet) -> IPNet | None:
    """The campus subnet overlapping ``net`` (edge inside, middlebox legs, campus hosts, lane
    pool; v4 or v6); None when the destination is wholly beyond the edge router."""
    return next((n for n in topo.campus_networks() if n.version == net.version and n.overlaps(net)), None)


def check_lane(lane: LaneSpec, topo: Topology, host: Host) -> str | None:
    """Validate the fields the flows depend on; return the canonical nat_ip (or None). Every
    problem is named at once, so an operator reading a refused lane fixes them in one go."""
    problems = []
    if lane.protocol not in IP_PROTO:
        problems.append(f"protocol {lane.protocol!r} is not tcp or udp")
    if not lane.dst_ports or not all(_is_port(lo) and _is_port(hi) and lo <= hi for lo, hi in lane.dst_ports):
        problems.append(f"dst_ports {lane.dst_ports!r} are not ranges within 1..65535")
    if lane.src_port is not None and not _is_port(lane.src_port):
        problems.append(f"src_port {lane.src_port!r} is not 1..65535")
    versions = set()
    if not lane.dst_nets:
        problems.append("no destination")
    for text in lane.dst_nets:
        if "%" in str(text):  # os-ken's address conversion would raise something else than ValueError
            problems.append(f"destination {text!r} carries an IPv6 zone id")
            continue
        try:
            net = ipaddress.ip_network(text)
        except ValueError:
            problems.append(f"destination (dst_ip/dst_nets) {text!r} is not an IPv4 or IPv6 network")
            continue
        versions.add(net.version)
        if not _is_unicast(net):
            problems.append(f"destination {net} is not a unicast address")
        elif (inside := _campus_network_of(topo, net)) is not None:
            problems.append(
                f"destination {net} is inside the campus ({inside}): lanes lead out through the edge router"
            )
        elif host.address_for(net.version) is None:
            problems.append(f"destination {net} is IPv{net.version} but {host.name} has no IPv{net.version} address")
    nat = None
    if lane.nat_ip is not None:
        try:
            nat_addr = ipaddress.IPv4Address(lane.nat_ip)
            nat = str(nat_addr)
            if nat_addr not in topo.lane_pool.prefix:
                problems.append(f"nat_ip {nat} is not in the lane pool {topo.lane_pool.prefix}")
        except ValueError:
            problems.append(f"nat_ip {lane.nat_ip!r} is not an IPv4 address")
    elif host.needs_nat and 4 in versions:
        problems.append(f"source {host.name} has a private address and needs a nat_ip")
    if problems:
        raise LaneCompileError(f"lane {lane.lane_id}: " + "; ".join(problems))
    return nat
