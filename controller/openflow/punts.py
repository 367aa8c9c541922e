"""Which budget a PACKET_IN spends, read from its raw bytes before any parser (pure).

A switch sends the controller two kinds of frames: the cabling probes its neighbours sent over
declared links (``compile/linkprobe``: only from link ports, every other probe is dropped on the
switch) and everything else it punts (the ARP fallback of ``base._arp_punt``, metered on the
switch). Both shared one per-connection token bucket (``server.GuardedDatapath._screen``), so a
host flooding ARP took every token and the probes starved: after a few missed rounds the links
read ``unverified`` and no lane could use them. Probes now spend a budget of their own; a host
cannot reach it (its probe frames are dropped at its port) and a flood of probes on a link port
cannot reach the other one.
"""

from __future__ import annotations

import struct

from viplanes.controller.compile.linkprobe import ETH_TYPE_PROBE

# OpenFlow 1.3 PACKET_IN: header (8), buffer_id (4), total_len (2), reason (1), table_id (1),
# cookie (8), then the match (type, length, padded to 8), 2 bytes of padding, the frame
_MATCH_AT = 24
_ETH_TYPE_AT = 12  # in the frame: after the two MAC addresses


def frame_ethertype(raw: bytes) -> int | None:
    """The EtherType of the frame a raw OF1.3 PACKET_IN carries, or None when it is too short."""
    if len(raw) < _MATCH_AT + 4:
        return None
    (match_len,) = struct.unpack_from("!H", raw, _MATCH_AT + 2)
    frame_at = _MATCH_AT + (match_len + 7) // 8 * 8 + 2
    if len(raw) < frame_at + _ETH_TYPE_AT + 2:
        return None
    return int(struct.unpack_from("!H", raw, frame_at + _ETH_TYPE_AT)[0])


def is_probe(raw: bytes) -> bool:
    """Does this raw PACKET_IN carry a cabling probe (whatever its signature says: the
    verifier judges that)?"""
    return frame_ethertype(raw) == ETH_TYPE_PROBE
