"""A deployment's block of conntrack zones: where it starts and whether it fits (pure).

Conntrack is per datapath: two deployments on one ovs-vswitchd keep apart only by using
disjoint zone ranges (docs/dataplane.md, "One vswitchd, several deployments").
"""

from __future__ import annotations

import ipaddress

# Conntrack zones (16 bits, per datapath): a deployment uses ``ct_zone_base`` and the zones after
# it, one for the related-ICMP lookup, one per lane-pool address, one per host
# (controller/compile/conntrack.py: ZoneLayout). Zone 0 is every zone-less ct() on the vswitchd.
CT_ZONE_BASE_DEFAULT = 0x1000
CT_ZONE_MAX = 0xFFFF


def ct_zones_needed(pool: ipaddress.IPv4Network, hosts: int) -> int:
    """How many consecutive zones a deployment with this pool and this many hosts uses."""
    return 1 + pool.num_addresses + hosts


def ct_zone_problem(base: object, pool: ipaddress.IPv4Network, hosts: int) -> str | None:
    """Why ``base`` cannot be this deployment's first conntrack zone (None: it can)."""
    if isinstance(base, bool) or not isinstance(base, int):
        return f"expected an integer, got {base!r}"
    last = base + ct_zones_needed(pool, hosts) - 1
    if base < 1 or last > CT_ZONE_MAX:
        return (
            f"zones {base}..{last} do not fit 1..{CT_ZONE_MAX} (1 + {pool.num_addresses} pool "
            f"addresses + {hosts} hosts from the base)"
        )
    return None
