"""Refuse a lane that needs a feature a switch on its path lacks (its profile, docs/hardware.md),
before anything is written: never half-installed at the switch, never silently narrowed.

Checked here: a rate cap needs meters at the path's first and last switch (where the compiler
puts them); a port range through a switch without masked port matches is carried as one entry
per exact port there (the compiler expands it), and refused when that expansion passes the lane's
match budget (``max_matches``): 1-65535 would be 131,070 entries on that switch. Connection tracking and tables follow the profile in
the compiler itself (a border without conntrack gets the stateless rules, all in table 0).
"""

from __future__ import annotations

from viplanes.domain.portmasks import entry_count
from viplanes.errors import Conflict, VipError
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import lane_path


def feature_refusal(
    topo: Topology,
    src_ip: str,
    rate_mbps: float | None,
    ports: tuple[tuple[int, int], ...],
    *,
    n_nets: int = 1,
    max_matches: int = 64,
) -> VipError | None:
    """Why the lane cannot be carried as asked on its path, or None. ``n_nets`` destinations and
    ``max_matches`` (``LaneLimits``) bound the exact-port expansion on switches without masks."""
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
    exact = n_nets * entry_count(ports, masked=False)
    if exact > max_matches:
        for hop in hops:
            sw = topo.switch(hop.switch)
            if not sw.caps.features.masked_ports:
                return Conflict(
                    f"{sw.name} (profile {sw.caps.profile}) has no masked_ports: this lane's ports would take "
                    f"{exact} exact matches there, more than a lane may have ({max_matches}); ask for fewer ports",
                    {"switch": sw.name, "feature": "masked_ports", "match_count": exact, "limit": max_matches},
                    code="switch_lacks_feature",
                )
    return None


def _lacks(switch: str, profile: str, feature: str, what: str) -> VipError:
    return Conflict(
        f"{switch} (profile {profile}) has no {feature}, which {what.split(';')[0]} needs;{what.split(';')[1]}",
        {"switch": switch, "feature": feature},
        code="switch_lacks_feature",
    )


def entries_per_destination(topo: Topology, src_ip: str, ports: tuple[tuple[int, int], ...]) -> int:
    """Port entries one destination takes on the lane's costliest switch: the exact ports where
    a switch of the path has no masked port matches, else the prefix cover (a name lane's
    re-resolve keeps as many addresses as ``max_matches`` holds at this size)."""
    host = topo.host_by_ip(src_ip)
    try:
        hops = lane_path(topo, host.name) if host is not None else ()
    except ValueError:
        hops = ()
    masked = all(topo.switch(h.switch).caps.features.masked_ports for h in hops)
    return entry_count(ports, masked=masked)
