"""A lane's place in the topology: its source host, its switch path, and how a reply leaves
each switch towards the host. Pure; shared by ``compiler`` and ``sharedflows``."""

from __future__ import annotations

import dataclasses
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.base import border_switch
from viplanes.controller.compile.fastmatch import PackedSetField
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Host, Topology
from viplanes.topologies.paths import Hop, lane_path


class LaneCompileError(ValueError):
    """The lane cannot be turned into flows on this topology (unknown source, bad field...)."""


def lane_source(lane: LaneSpec, topo: Topology) -> Host:
    host = None
    try:
        host = topo.host_by_ip(lane.src_ip)
    except ValueError:
        pass
    if host is None:
        raise LaneCompileError(f"lane {lane.lane_id}: source {lane.src_ip!r} is no host of topology {topo.name!r}")
    return host


def lane_hops(lane: LaneSpec, topo: Topology) -> tuple[Hop, ...]:
    """The lane's path; raises NoLanePath (a ValueError) when the source cannot have one."""
    return lane_path(topo, lane_source(lane, topo).name)


def gateway_mac(topo: Topology, host: Host, version: int = 4) -> str:
    """The MAC of the host's (v4 or v6) gateway: a lane's replies arrive as if from it."""
    legs = [topo.edge.inside, topo.edge.outside]
    legs += [leg for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]
    gateway = host.gateway if version == 4 else host.gateway6
    for leg in legs:
        leg_ip = leg.ip if version == 4 else getattr(leg, "ip6", None)
        if leg_ip is not None and leg_ip.ip == gateway:
            return leg.mac
    raise LaneCompileError(f"IPv{version} gateway {gateway} of {host.name} is no modeled interface")


def deliver_to_host(topo: Topology, host: Host, hops: tuple[Hop, ...], i: int, version: int = 4) -> list[Any]:
    """Actions of a reverse packet at hop ``i`` on its way to the host: towards the host with
    the lane marker, or (at the first hop) into the host's port as if from its gateway."""
    if i == 0:
        return [
            PackedSetField(eth_src=gateway_mac(topo, host, version)),
            PackedSetField(eth_dst=host.iface.mac),
            parser.OFPActionOutput(hops[0].in_port),
        ]
    actions = [] if i < len(hops) - 1 else [PackedSetField(eth_src=topo.lane_pool.mac)]
    return actions + [parser.OFPActionOutput(hops[i].in_port)]


def stateful(topo: Topology) -> bool:
    border = border_switch(topo)
    return border is not None and border.conntrack


def router_translates(topo: Topology) -> bool:
    """The border cannot translate (no ``nat`` or ``set_field``) and the topology names the edge
    router as ``nat_router``: NAT'd lanes leave the border with the host's own address, the
    router translates them, and their replies come back to the host's own address as the router
    presents them after un-translating (docs/hardware.md)."""
    border = border_switch(topo)
    if border is None or topo.nat_router != topo.edge.name:
        return False
    return not (border.caps.features.nat and border.caps.features.set_field)


def as_compiled(lane: LaneSpec, topo: Topology) -> LaneSpec:
    """The lane as the switches carry it: without its lane-pool address where the router
    translates (no set-field, no ``nat()``, no ARP replies for that address at the border)."""
    return dataclasses.replace(lane, nat_ip=None) if lane.nat_ip is not None and router_translates(topo) else lane
