"""Does every lane the topology must carry find the features it needs on its path?

The compiler translates a NAT'd lane (``nat(src=...)`` or set_field) at the border switch,
where the edge router attaches, so a NAT'd host needs a border that can translate: ``nat`` and
``set_field``. A topology may instead declare ``nat_router:`` naming the edge router, which then
translates lane traffic itself: the compiler hands it the lane untranslated
(``controller/compile/path.py:router_translates``). Naming a NAT middlebox is refused: its
replies would return through the firewall. A dual-stack host's v6 lanes need ``ipv6`` on
every switch of its path. ``viplanes topology check`` refuses the file when anything is missing.
"""

from __future__ import annotations

from viplanes.topologies.model import Switch, Topology
from viplanes.topologies.paths import NoLanePath, lane_paths


def budgeted(topo: Topology) -> bool:
    """Some switch declares ``max_flows``: lane requests are then checked against budgets."""
    return any(sw.caps.max_flows.limited for sw in topo.switches)


def lane_problems(topo: Topology) -> list[str]:
    """One readable line per host whose lanes cannot be carried as the profiles stand."""
    problems: list[str] = []
    for host, path in lane_paths(topo).items():
        if isinstance(path, NoLanePath):
            continue
        border = topo.switch(path[-1].switch)
        lacking = [f for f in ("nat", "set_field") if not getattr(border.caps.features, f)]
        if topo.host(host).needs_nat and lacking and not topo.nat_router:
            problems.append(
                f"{topo.source}: hosts.{host}: its lanes are NAT'd at {border.name} (the border, profile "
                f"{border.caps.profile}), which lacks {' and '.join(lacking)}; give {border.name} that "
                "feature or name the translating router in nat_router"
            )
        elif topo.host(host).needs_nat and lacking and topo.nat_router != topo.edge.name:
            problems.append(
                f"{topo.source}: hosts.{host}: nat_router {topo.nat_router} is a middlebox: lanes are handed "
                f"untranslated only to the edge router ({topo.edge.name}); name it, or give {border.name} nat"
            )
        if topo.host(host).ip6 is not None:
            no_v6 = [h.switch for h in path if not topo.switch(h.switch).caps.features.ipv6]
            if no_v6:
                problems.append(f"{topo.source}: hosts.{host}: its IPv6 lanes cross {', '.join(no_v6)}, without ipv6")
    return problems


def carries(topo: Topology, sw: Switch) -> str:
    """What lanes this switch can carry, in the operator's words (``topology check``)."""
    f = sw.caps.features
    parts = ["tcp/udp lanes"]
    if f.ipv6:
        parts.append("IPv6")
    at_border = topo.edge.inside.attach is not None and topo.edge.inside.attach.switch == sw.name
    if at_border:
        parts.append("stateful border (conntrack)" if f.conntrack else "stateless border (ACK-only replies)")
        if f.nat and f.set_field:
            parts.append("NAT")
        else:
            parts.append("no NAT" + (f" (done by {topo.nat_router})" if topo.nat_router else ""))
    parts.append("rate caps" if f.meters else "no rate caps (no meters)")
    if not f.multi_table:
        parts.append("single table")
    limit = sw.caps.max_flows
    if limit.total is not None:
        parts.append(f"max {limit.total} flows")
    for table, n in limit.tables:
        parts.append(f"max {n} flows in table {table}")
    return ", ".join(parts)


def conntrack_ceiling_problem(topo: Topology) -> str | None:
    """Why the border's connection table has no ceiling, or None. OpenFlow cannot set one: the
    controller sets per-zone limits through ``ct_appctl`` or the operator sets them on the host."""
    at = topo.edge.inside.attach
    border = topo.switch(at.switch) if at else None
    if border is None or not border.conntrack or border.ct_appctl.strip() or border.ct_limits_external:
        return None
    return (
        f"{border.name}: a conntrack border with no ceiling on its connection table: set ct_appctl "
        "(the controller sets zone limits) or set the limits on the switch host and say "
        "ct_limits_external: true (viplanes topology ct-limits FILE prints the commands)"
    )
