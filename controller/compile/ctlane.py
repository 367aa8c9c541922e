"""A lane's commit path at a conntrack border, bounded per lane (issue 28). Pure (``datapath=None``).

The lane's forward rule at the border does not commit by itself: it loads the lane id into
``reg0`` and looks the packet up, uncommitted, in the lane's zone (``conntrack.lookup``). In
``CT_COMMIT_TABLE`` two flows per lane and address family take it from there:

- ``+trk+new-inv`` with ``ct_mark=0`` (priority 101): the lookup found no entry, so this packet
  would open a connection: through the lane's new-connection meter (``ct_new_per_s`` packets per
  second, switch setting; the meter drops the excess), then ``ct(commit, zone, nat,
  exec(ct_mark))``;
- ``+trk-inv`` (priority 100): the same commit, unmetered. That is every packet of a connection
  the zone already holds: established, related, and one that is still ``+new`` because it never
  saw a reply (a one-way UDP stream, a retransmitted SYN), which carries the ``ct_mark`` its
  commit gave it (a lane id, never 0). So the meter counts connections, not packets, and a lane's
  open connections never wait behind its own SYNs.

A packet conntrack finds invalid matches neither and is dropped by the table-miss (base flows).
A SYN the meter dropped never takes a table entry; what got through is further bounded by the
zone's connection limit (switch configuration: ``controller/runtime/ctlimits.py``). Zones are one
per lane address (``conntrack.ZoneLayout``): a host's lanes share theirs, other hosts never.
"""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import conntrack
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.controller.compile.fastmatch import PackedSetField
from viplanes.controller.compile.path import LaneCompileError
from viplanes.domain.matches import ETH_TYPE
from viplanes.topologies.model import Host, Topology

# A lane's new-connection meter id: its lane id in the upper half of OpenFlow's meter ids (its
# rate-cap meter is the lane id itself, below).
NEWCONN_METER_BASE = 0x80000000
NEWCONN_MAX_LANE_ID = ofp.OFPM_MAX - 1 - NEWCONN_METER_BASE  # below the ARP punt's meter (OFPM_MAX)
PRIORITY_COMMIT = 100
NEW = conntrack.ct_state(conntrack.CT_TRK | conntrack.CT_NEW, conntrack.CT_INV)
TRACKED = conntrack.ct_state(conntrack.CT_TRK, conntrack.CT_INV)
UNCOMMITTED = 0  # the ct_mark of a packet whose lookup found no entry (every commit marks >= 1)

# id(topology) -> (its hosts, name -> index); the hosts are kept, so an id is never mistaken
_HOST_INDEX: dict[int, tuple[object, dict[str, int]]] = {}


def host_index(topo: Topology, host: Host) -> int:
    """The host's position in the topology (its conntrack zone, ``conntrack.ZoneLayout.host``)."""
    kept = _HOST_INDEX.get(id(topo))
    if kept is None or kept[0] is not topo.hosts:
        if len(_HOST_INDEX) > 64:
            _HOST_INDEX.clear()
        kept = _HOST_INDEX[id(topo)] = (topo.hosts, {h.name: i for i, h in enumerate(topo.hosts)})
    return kept[1][host.name]


def zone_layout(topo: Topology) -> conntrack.ZoneLayout:
    """The deployment's conntrack zones: its base (``Topology.ct_zone_base``), pool and hosts.
    ValueError when they do not fit the 16-bit zone space (the loader refuses such a file)."""
    return conntrack.ZoneLayout(topo.ct_zone_base, topo.lane_pool.prefix, len(topo.hosts))


def zone_for(topo: Topology, host: Host, nat_ip: str | None) -> int:
    """The zone of the lane's connections of one family (``nat_ip`` None: untranslated)."""
    try:
        return zone_layout(topo).lane(nat_ip, host_index(topo, host))
    except ValueError as exc:
        raise LaneCompileError(str(exc)) from None


def newconn_meter_id(lane_id: int) -> int:
    """The lane's new-connection meter at the border (distinct from every rate-cap meter)."""
    if not 1 <= lane_id <= NEWCONN_MAX_LANE_ID:
        raise LaneCompileError(f"lane id {lane_id} has no new-connection meter id (1..{NEWCONN_MAX_LANE_ID})")
    return NEWCONN_METER_BASE + lane_id


def newconn_meter(lane_id: int, per_s: int, command: int = ofp.OFPMC_ADD) -> Any:
    """The meter that bounds how fast one lane opens connections (packets/s of ``+new``)."""
    band = parser.OFPMeterBandDrop(rate=max(1, per_s), burst_size=max(1, per_s))
    return parser.OFPMeterMod(
        None,
        command=command,
        flags=ofp.OFPMF_PKTPS | ofp.OFPMF_BURST,
        meter_id=newconn_meter_id(lane_id),
        bands=[band],
    )


def is_newconn_meter_add(msg: Any) -> bool:
    """Is this the ADD of a lane's new-connection meter (see ``batch.merge``)?"""
    return (
        isinstance(msg, parser.OFPMeterMod)
        and msg.command == ofp.OFPMC_ADD
        and NEWCONN_METER_BASE < msg.meter_id <= NEWCONN_METER_BASE + NEWCONN_MAX_LANE_ID
    )


def lookup_actions(lane_id: int, zone: int) -> list[Any]:
    """The border forward rule's actions: lane id into ``reg0``, uncommitted lookup."""
    return [parser.OFPActionSetField(**{conntrack.LANE_REG: lane_id}), conntrack.lookup(zone)]


def commit_flows(
    lane_id: int,
    version: int,
    zone: int,
    nat_ip: str | None,
    after_commit: list[Any],
    hard: int,
) -> list[Any]:
    """The two ``CT_COMMIT_TABLE`` flows of one lane and family (see the module docstring);
    ``after_commit``: what an untranslated packet does once committed (translated ones go on in
    ``CT_EGRESS_TABLE``)."""
    actions = [conntrack.commit(lane_id, nat_ip, zone), *(after_commit if nat_ip is None else [])]
    out = []
    metered = {"ct_state": NEW, "ct_mark": UNCOMMITTED}
    for extra, meter, priority in (
        (metered, newconn_meter_id(lane_id), PRIORITY_COMMIT + 1),
        ({"ct_state": TRACKED}, None, PRIORITY_COMMIT),
    ):
        inst: list[Any] = [parser.OFPInstructionMeter(meter)] if meter is not None else []
        inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
        out.append(
            parser.OFPFlowMod(
                None,
                table_id=conntrack.CT_COMMIT_TABLE,
                cookie=lane_cookie(lane_id),
                command=ofp.OFPFC_ADD,
                priority=priority,
                idle_timeout=0,
                hard_timeout=hard,
                flags=ofp.OFPFF_SEND_FLOW_REM,
                buffer_id=ofp.OFP_NO_BUFFER,
                match=parser.OFPMatch(**{conntrack.LANE_REG: lane_id}, eth_type=ETH_TYPE[version], **extra),
                instructions=inst,
            )
        )
    return out


def untranslated_egress(topo: Topology, host: Host, out_port: int) -> list[Any]:
    """Where an untranslated lane packet goes after its commit: to the edge router."""
    return [
        PackedSetField(eth_src=host.iface.mac),
        PackedSetField(eth_dst=topo.edge.inside.mac),
        parser.OFPActionOutput(out_port),
    ]
