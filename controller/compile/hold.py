"""What a lane's packets do while no usable path is left (docs/dataplane.md, "Link failures").

They are *held*: dropped at the lane's first switch by the lane's own forward matches with no
actions. Not sent back to the campus path: the firewall and NAT would meet a connection in its
middle that they never saw start (a stateful firewall drops it, the NAT gives it another source
address, and the far end resets it). Dropped packets are what TCP already survives: it
retransmits with back-off, and the connection resumes on whichever path comes back first, with
its lane-pool address and its conntrack entry at the border unchanged. Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile.path import lane_hops
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import NoLanePath

OFMsgs = list[Any]


def hold_flows(lane: LaneSpec, topo: Topology, now: float) -> dict[int, OFMsgs]:
    """The lane's forward matches at its first switch, each dropping (no instructions).

    Compiled over every declared link (``unusable_links`` cleared): only the first hop's
    matches are kept, and they send nothing anywhere. Raises what ``compile_lane`` raises.
    """
    declared = dataclasses.replace(topo, unusable_links=frozenset())
    first = lane_hops(lane, declared)[0]
    held: OFMsgs = []
    for msg in compiler.compile_lane(lane, declared, now).get(first.dpid, []):
        if not isinstance(msg, parser.OFPFlowMod) or msg.table_id != 0:
            continue
        if msg.match.get("in_port") != first.in_port:
            continue  # the reverse direction's flows: nothing to hold there
        held.append(
            parser.OFPFlowMod(
                None,
                table_id=0,
                cookie=msg.cookie,
                command=ofp.OFPFC_ADD,
                priority=msg.priority,
                idle_timeout=0,
                hard_timeout=msg.hard_timeout,
                flags=msg.flags,
                buffer_id=ofp.OFP_NO_BUFFER,
                match=msg.match,
                instructions=[],
            )
        )
    return {first.dpid: held}


def held_dpids(lane: LaneSpec, topo: Topology) -> tuple[int, ...]:
    """The one switch a held lane has flows on: its first."""
    return (lane_hops(lane, dataclasses.replace(topo, unusable_links=frozenset()))[0].dpid,)


def compile_or_hold(
    lane: LaneSpec, topo: Topology, now: float, meter_command: int = ofp.OFPMC_ADD
) -> tuple[dict[int, OFMsgs], str | None]:
    """The lane over the usable links, and None; or, when no usable path is left (the view has
    unusable links and ``NoLanePath`` names them), its held flows and why. A lane that has no
    path over the declared links either is no lane: ``NoLanePath`` propagates."""
    try:
        return compiler.compile_lane(lane, topo, now, meter_command=meter_command), None
    except NoLanePath as exc:
        if not topo.unusable_links:
            raise
        return hold_flows(lane, topo, now), str(exc)
