"""A seed-003 tool's start-up cost, taken out of its rate.

The seed timed each tool on a 1 GiB file (scp: 114 s), so start-up (ssh's handshake, a
client's start, the first request's round trip) was under 1% of a transfer. The lab's file is
16 MiB and its round trip 300 ms: ssh's ~15 round trips alone are 5.5 s against an 8 s
transfer. So before each tools run the lab fetches a 1-byte file with the same tool and options,
and the tools findings use the rate over what is left (``x_mbps_net`` in the record, beside the
wall-clock ``mbps``). Pure: the runner passes the times in.
"""

from __future__ import annotations

PROBE_DIR = "probe"  # under the bucket: one 1-byte file, fetched by every tool for its start-up
PROBE_NAME = "probe.dat"
MOST_REMOVED = 0.75  # never take out more than this share of the wall time (a noisy probe)


def net_mbps(nbytes: int, wall_s: float, startup_s: float) -> float:
    """Mbit/s over the wall time less the start-up (at most ``MOST_REMOVED`` of it)."""
    if wall_s <= 0:
        return 0.0
    rest = max(wall_s - max(startup_s, 0.0), wall_s * (1 - MOST_REMOVED))
    return nbytes * 8 / rest / 1e6
