"""The priority bands, EtherTypes and ICMP types, and the one FlowMod builder every compile
module shares.

Split from ``base.py`` so the parts of the base flows (``hostguard``) and the lane compiler use
one vocabulary without importing ``base`` (no import cycle). What each band holds is in
``base.py``'s docstring.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

PRIORITY_TABLE_MISS = 0
PRIORITY_BYPASS_DROP = 100
PRIORITY_POOL_DROP = 150  # table 0 at the border: from the edge to a lane address, below the lanes
PRIORITY_ARP_PROXY = 200
PRIORITY_ARP_REPLY = 300
PRIORITY_GUARD = 900
PRIORITY_RELATED = 950
PRIORITY_RELATED_NAT = 951  # the same per lane-pool address, in its zone (sharedflows)
PRIORITY_PROBE_DROP = 960  # cabling probes anywhere but a declared link port (linkprobe)
PRIORITY_PROBE = 970  # cabling probes on a declared link port: to the controller
PRIORITY_LANE = 1000
PRIORITY_CT_POOL_DROP = 100  # table 1
PRIORITY_CT_EGRESS = 100  # table 2
ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806
ETH_TYPE_IPV6 = 0x86DD
IP_PROTO_ICMP = 1
IP_PROTO_ICMPV6 = 58
ICMP_ERRORS = (3, 11)  # destination unreachable (incl. fragmentation needed), time exceeded
# ICMPv6 errors: destination unreachable, packet too big, time exceeded. Never neighbour
# discovery (133..137): it keeps the normal path everywhere.
ICMPV6_ERRORS = (1, 2, 3)
# The ARP punt's meter: the highest meter id OpenFlow allows, so never a lane's (lane meters
# are the lane id, and lane ids must stay below it).
ARP_PUNT_METER = ofp.OFPM_MAX
ARP_PUNT_PPS = 50

OFMsgs = list[Any]


def flow(
    priority: int, cookie: int, match: Any, actions: list[Any], table_id: int = 0, meter: int | None = None, **kw: Any
) -> Any:
    """An ADD with apply-actions (none: drop), optionally metered."""
    inst: list[Any] = [parser.OFPInstructionMeter(meter)] if meter is not None else []
    if actions:
        inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
    return parser.OFPFlowMod(
        None,
        table_id=table_id,
        cookie=cookie,
        command=ofp.OFPFC_ADD,
        priority=priority,
        match=match,
        instructions=inst,
        buffer_id=ofp.OFP_NO_BUFFER,
        **kw,
    )
