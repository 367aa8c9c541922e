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
from typing import Any

from os_ken.ofproto import nicira_ext
from os_ken.ofproto import ofproto_v1_3_parser as parser

# ct_state bits (OVS's CS_* values; os-ken 4.2 names none of them)
CT_NEW, CT_EST, CT_REL, CT_RPL, CT_INV, CT_TRK = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NX_NAT_F_SRC = 1 << 0
# The zone of lanes without NAT (IPv6, hosts with their own public address): lanes never share
# a 5-tuple (policy refuses identical matches). "VP".
CT_ZONE = 0x5650
# A NAT'd lane's connections live in the zone of its lane-pool address (lane_zone). Entries
# outlive their lane (OVS keeps an established TCP entry for a day; nothing flushes them), and in
# one shared zone a host's old connection kept its old translation: after its address went to
# another host's lane, a new lane of the first host sent that connection out under the other
# host's address. With a zone per address, a new lane's address starts from no old entries.
NAT_ZONE_BASE = 0x8000  # 0x8000-0xFFFF: distinct for every address of a pool up to a /17
CT_TABLE = 1  # where replies come back after ct(nat) recirculation
# Where a NAT'd lane's outbound packet goes after its commit: conntrack skips both the commit and
# the NAT for a packet it finds invalid (TCP SYN+FIN, a bare FIN, a SYN-ACK that opens nothing, a
# bad checksum), and a commit that went straight on to the output sent such a packet out of the
# campus with the host's private address. The egress table forwards only what was translated.
CT_EGRESS_TABLE = 2
CT_MARK_MAX = 0xFFFFFFFF  # ct_mark is 32 bits: the lane id lives there


def ct_state(on: int, off: int = 0) -> tuple[int, int]:
    """A ct_state match as (value, mask): bits in ``on`` set, bits in ``off`` clear."""
    return on, on | off


REPLY_ESTABLISHED = ct_state(CT_TRK | CT_EST | CT_RPL, CT_INV)
REPLY_RELATED = ct_state(CT_TRK | CT_REL | CT_RPL, CT_INV)


def lane_zone(nat_ip: str | None) -> int:
    """The conntrack zone of a lane's connections: its pool address's own when it is NAT'd."""
    if nat_ip is None:
        return CT_ZONE
    return NAT_ZONE_BASE | (int(ipaddress.IPv4Address(nat_ip)) & 0x7FFF)


def commit(mark: int, nat_ip: str | None) -> Any:
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
        zone_ofs_nbits=lane_zone(nat_ip),
        recirc_table=recirc,
        alg=0,
        actions=actions,
    )


def track_reply(zone: int = CT_ZONE) -> Any:
    """ct(zone, nat, table=CT_TABLE): look the packet up, undo the lane's NAT, continue there."""
    return parser.NXActionCT(
        flags=0, zone_src="", zone_ofs_nbits=zone, recirc_table=CT_TABLE, alg=0, actions=[parser.NXActionNAT(flags=0)]
    )
