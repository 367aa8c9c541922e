"""Per-zone conntrack limits at the border: switch configuration, not OpenFlow (issue 28).

Open vSwitch 3.1 takes a zone's connection limit only through ``ovs-appctl dpctl/ct-set-limits``
on the switch's own host: OpenFlow has no such message, and its OVSDB ``CT_Zone`` has only a
timeout policy. The border declares whether the controller can reach it that way: ``ct_appctl`` in the
topology ("<target> [<datapath>]", e.g. "ovs-vswitchd netdev@ovs-netdev"); empty means it
cannot, and the controller logs once per connection that the zones there have no limit (each
lane's new-connection meter, an OpenFlow meter, still bounds how fast they fill).

The zones are known from the topology alone (``conntrack.ZoneLayout``: every pool address and
every host, from the deployment's ``ct_zone_base``), so one call at connect time limits every zone a lane can ever use; OVS keeps the
limits until its datapath goes away, and a reconnect sets them again.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable
from typing import Any

from viplanes.controller.compile.base import border_switch
from viplanes.controller.compile.ctlane import zone_layout
from viplanes.topologies.model import Topology

LOG = logging.getLogger(__name__)
CHUNK = 256  # zones per ovs-appctl call (an argument list of a few KB)
Run = Callable[..., Any]


def lane_zones(topo: Topology) -> list[int]:
    """Every zone a lane of this topology can commit in, each once, ascending."""
    layout = zone_layout(topo)
    zones = {layout.nat(str(addr)) for addr in topo.lane_addresses()}
    zones |= {layout.host(i) for i in range(len(topo.hosts))}
    return sorted(zones)


def limit_arguments(topo: Topology) -> list[str]:
    """``zone=Z,limit=N`` for every lane zone at the border ([] when it keeps no state)."""
    border = border_switch(topo)
    if border is None or not border.conntrack:
        return []
    return [f"zone={z},limit={border.ct_zone_limit}" for z in lane_zones(topo)]


def set_limits_commands(topo: Topology) -> list[list[str]]:
    """The ovs-appctl commands that limit every lane zone at the border (none when the border
    keeps no state or declares no ``ct_appctl``)."""
    border = border_switch(topo)
    if border is None or not border.conntrack or not border.ct_appctl.strip():
        return []
    target, *datapath = border.ct_appctl.split()
    zones = lane_zones(topo)
    return [
        ["ovs-appctl", "-t", target, "--timeout=10", "dpctl/ct-set-limits", *datapath]
        + [f"zone={z},limit={border.ct_zone_limit}" for z in zones[i : i + CHUNK]]
        for i in range(0, len(zones), CHUNK)
    ]


def apply_zone_limits(topo: Topology | None, dpid: int, run: Run = subprocess.run) -> str | None:
    """At the border's (re)connection: set its zone limits. Returns why not (also logged)."""
    border = border_switch(topo) if topo is not None else None
    if topo is None or border is None or border.dpid != dpid or not border.conntrack:
        return None
    commands = set_limits_commands(topo)
    if not commands:
        if border.ct_limits_external:
            return None  # the operator sets them on the switch host (topology ct-limits)
        why = (
            f"{border.name}: no per-zone conntrack limit (ct_appctl not set, ct_limits_external false): "
            "the border's connection table has no ceiling; lanes' new-connection meters still apply"
        )
        LOG.error("%s", why)
        return why
    for argv in commands:
        try:
            done = run(argv, capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{border.name}: conntrack zone limits not set: {exc}"
            LOG.error("%s", why)
            return why
        if done.returncode != 0:
            why = f"{border.name}: conntrack zone limits not set: {(done.stderr or done.stdout).strip()[:300]}"
            LOG.error("%s", why)
            return why
    LOG.info(
        "%s: conntrack limit %d per zone on %d lane zones",
        border.name,
        border.ct_zone_limit,
        len(lane_zones(topo)),
    )
    return None
