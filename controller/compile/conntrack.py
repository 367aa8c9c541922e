"""Open vSwitch connection tracking as os-ken messages: the few ``ct`` actions and ``ct_state``
matches the lanes use. Pure data (no I/O).

Checked on this machine's userspace datapath (OVS 3.1, netdev bridge, two network namespaces)
before use: ``ct(commit,zone=Z,nat(src=A),exec(set_field:M->ct_mark))`` on the way out plus
``ct(zone=Z,nat,table=1)`` on the way back give ``+trk+est+rpl`` with ``ct_mark=M`` for replies
(un-NATed), an inbound SYN to another port is ``+new`` (dropped), and an ICMP fragmentation-needed
quoting a lane packet is ``+rel`` with its *inner* header rewritten back to the host's own
address (so path MTU discovery keeps working for NAT'd hosts).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import nicira_ext
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.topologies.zones import ct_zone_problem, ct_zones_needed

# ct_state bits (OVS's CS_* values; os-ken 4.2 names none of them)
CT_NEW, CT_EST, CT_REL, CT_RPL, CT_INV, CT_TRK = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NX_NAT_F_SRC = 1 << 0
# Zones: every zone this deployment uses is in one block, ``ZoneLayout`` (dataplane.md: zones).
# Conntrack is per datapath, not per bridge or per controller: two deployments on one vswitchd
# (two labs, a test and a lab, a second controller) that numbered zones the same way flushed and
# filled each other's. Each takes its block from its own base (the topology's ``ct_zone_base``,
# or the ``VIPLANES_CT_ZONE_BASE`` setting): blocks that do not overlap share no zone.
CT_TABLE = 1  # where replies come back after ct(nat) recirculation
# Where a NAT'd lane's outbound packet goes after its commit: conntrack skips both the commit and
# the NAT for a packet it finds invalid (TCP SYN+FIN, a bare FIN, a SYN-ACK that opens nothing, a
# bad checksum), and a commit that went straight on to the output sent such a packet out of the
# campus with the host's private address. The egress table forwards only what was translated.
CT_EGRESS_TABLE = 2
CT_MARK_MAX = 0xFFFFFFFF  # ct_mark is 32 bits: the lane id lives there
# Where a conntrack lane's outbound packet goes after its first, uncommitted lookup (``lookup``):
# ``reg0`` carries the lane id there; a ``+new`` packet the zone holds no entry for (ct_mark 0)
# passes the lane's new-connection meter before its commit, anything else (established, related,
# or a connection still ``+new`` because no reply came yet) is committed unmetered, +inv dropped.
CT_COMMIT_TABLE = 3
LANE_REG = "reg0"
NXT_CT_FLUSH_ZONE = 29  # Nicira extension message: delete every conntrack entry of one zone
NX_VENDOR_ID = 0x00002320


def ct_state(on: int, off: int = 0) -> tuple[int, int]:
    """A ct_state match as (value, mask): bits in ``on`` set, bits in ``off`` clear."""
    return on, on | off


REPLY_ESTABLISHED = ct_state(CT_TRK | CT_EST | CT_RPL, CT_INV)
REPLY_RELATED = ct_state(CT_TRK | CT_REL | CT_RPL, CT_INV)


@dataclass(frozen=True)
class ZoneLayout:
    """One deployment's zones, ``base`` .. ``base + span - 1``:

    - ``base``: the zone the base related-ICMP flows look up; no lane commits there;
    - ``base + 1 + i`` for the pool's i-th address (from its network address): a NAT'd lane's
      connections, one zone per lane-pool address, so a new lane of an address starts from no
      old entries (an address going to another host's lane never carries the first host's);
    - after those, ``base + 1 + pool size + j`` for the topology's j-th host: its untranslated
      lanes (IPv6, a host's own public address), so one host's lanes cannot fill a table other
      hosts share.
    """

    base: int
    pool: ipaddress.IPv4Network
    hosts: int

    def __post_init__(self) -> None:
        problem = ct_zone_problem(self.base, self.pool, self.hosts)
        if problem is not None:
            raise ValueError(f"ct_zone_base {self.base}: {problem}")

    @property
    def span(self) -> int:
        return ct_zones_needed(self.pool, self.hosts)

    @property
    def related(self) -> int:
        """The zone the base related rule looks up (no lane commits there)."""
        return self.base

    def nat(self, nat_ip: str) -> int:
        """The zone of a lane-pool address's connections (every lane of the host it is lent to)."""
        offset = int(ipaddress.IPv4Address(nat_ip)) - int(self.pool.network_address)
        if not 0 <= offset < self.pool.num_addresses:
            raise ValueError(f"{nat_ip} is not in the lane pool {self.pool}: no conntrack zone")
        return self.base + 1 + offset

    def host(self, host_index: int) -> int:
        """The zone of a host's untranslated lane connections (its public IPv4 and its IPv6)."""
        if not 0 <= host_index < self.hosts:
            raise ValueError(f"host index {host_index} has no conntrack zone (0..{self.hosts - 1})")
        return self.base + 1 + self.pool.num_addresses + host_index

    def lane(self, nat_ip: str | None, host_index: int) -> int:
        """The zone of a lane's connections of one address family: its pool address's own when
        it is NAT'd, else its host's own. Never shared between hosts, so one zone's limit bounds
        one host (``dataplane.md``: zone reuse)."""
        return self.nat(nat_ip) if nat_ip is not None else self.host(host_index)

    def zones(self) -> range:
        """Every zone of the deployment (what another deployment on the vswitchd must not use)."""
        return range(self.base, self.base + self.span)


def lookup(zone: int) -> Any:
    """ct(zone, table=CT_COMMIT_TABLE): no commit, no NAT; only tells ``+new`` from the rest."""
    return parser.NXActionCT(
        flags=0,
        zone_src="",
        zone_ofs_nbits=zone,
        recirc_table=CT_COMMIT_TABLE,
        alg=0,
        actions=[],
    )


def flush_zone(zone: int) -> Any:
    """NXT_CT_FLUSH_ZONE: the switch deletes every conntrack entry of ``zone`` (sent when the last
    lane of an address leaves, so its next holder starts from an empty zone and its limit)."""
    return parser.OFPExperimenter(
        None, experimenter=NX_VENDOR_ID, exp_type=NXT_CT_FLUSH_ZONE, data=bytes(6) + zone.to_bytes(2, "big")
    )


def commit(mark: int, nat_ip: str | None, zone: int) -> Any:
    """ct(commit, zone, [nat(src=nat_ip)], exec(set ct_mark)): opens the connection (and its
    replies and related ICMP errors) for one lane; the NAT, if any, applies to the packet too,
    which then goes on in ``CT_EGRESS_TABLE`` (see there) instead of to the lane's output."""
    actions: list[Any] = []
    if nat_ip is not None:
        actions.append(parser.NXActionNAT(flags=NX_NAT_F_SRC, range_ipv4_min=nat_ip, range_ipv4_max=nat_ip))
    actions.append(parser.OFPActionSetField(ct_mark=mark))
    recirc = CT_EGRESS_TABLE if nat_ip is not None else nicira_ext.NX_CT_RECIRC_NONE
    return parser.NXActionCT(
        flags=nicira_ext.NX_CT_F_COMMIT,
        zone_src="",
        zone_ofs_nbits=zone,
        recirc_table=recirc,
        alg=0,
        actions=actions,
    )


def track_reply(zone: int) -> Any:
    """ct(zone, nat, table=CT_TABLE): look the packet up, undo the lane's NAT, continue there."""
    return parser.NXActionCT(
        flags=0,
        zone_src="",
        zone_ofs_nbits=zone,
        recirc_table=CT_TABLE,
        alg=0,
        actions=[parser.NXActionNAT(flags=0)],
    )
