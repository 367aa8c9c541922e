"""Refuse a lane that needs a feature a switch on its path lacks (its profile, docs/hardware.md),
before anything is written: never half-installed at the switch, never silently narrowed.

Checked here: a rate cap needs meters at the path's first and last switch (where the compiler
puts them); a port range needs masked port matches on every switch of the path (expanding
ranges into exact ports is not done yet). Connection tracking and tables follow the profile in
the compiler itself (a border without conntrack gets the stateless rules, all in table 0).
"""

from __future__ import annotations

from viplanes.errors import Conflict, VipError
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import lane_path


def feature_refusal(
    topo: Topology, src_ip: str, rate_mbps: float | None, ports: tuple[tuple[int, int], ...]
) -> VipError | None:
    host = topo.host_by_ip(src_ip)
    if host is None:
        return None  # the policy refuses an unknown source with its own reason
    try:
        hops = lane_path(topo, host.name)
    except ValueError:
        return None  # no path: the policy says so
    if rate_mbps:
        for hop in {hops[0].switch: hops[0], hops[-1].switch: hops[-1]}.values():
            sw = topo.switch(hop.switch)
            if not sw.caps.features.meters:
                return _lacks(sw.name, sw.caps.profile, "meters", "a rate cap (rate_mbps); ask without one")
    if any(lo != hi for lo, hi in ports):
        for hop in hops:
            sw = topo.switch(hop.switch)
            if not sw.caps.features.masked_ports:
                return _lacks(sw.name, sw.caps.profile, "masked_ports", "a port range; ask for single ports")
    return None


def _lacks(switch: str, profile: str, feature: str, what: str) -> VipError:
    return Conflict(
        f"{switch} (profile {profile}) has no {feature}, which {what.split(';')[0]} needs;{what.split(';')[1]}",
        {"switch": switch, "feature": feature},
        code="switch_lacks_feature",
    )
