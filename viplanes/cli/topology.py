"""`viplanes topology ...`: let operators validate a campus file before the controller uses it."""

from __future__ import annotations

import click

from viplanes.topologies.capcheck import budgeted, carries, conntrack_ceiling_problem, lane_problems
from viplanes.topologies.loader import TopologyError, load_topology
from viplanes.topologies.model import Switch, Topology
from viplanes.topologies.paths import NoLanePath, bypass_ports, format_path, lane_paths


@click.group()
def topology() -> None:
    """Campus topology files."""


def _sflow(sw: Switch) -> str:
    """What ``topology check`` says of a sampling switch (topologies/sflowfields.py)."""
    if sw.sflow is None:
        return ""
    sources = ",".join(str(a) for a in sw.sflow.sources)
    if sw.sflow.ifindex_ovsdb:
        ports = f"ifIndexes learned from OVSDB {sw.sflow.ifindex_ovsdb}"
    elif sw.sflow.ifindex:
        ports = f"{len(sw.sflow.ifindex)} ifIndexes"
    else:
        ports = "no ifIndexes: every sample refused (declare ifindex, or ifindex: ovsdb)"
    return f"; sflow agent {sw.sflow.agent} from {sources}, {ports}"


def _load_or_exit(file: str) -> Topology:
    """The topology in ``file``, or its problems on stderr and exit 1."""
    try:
        return load_topology(file)
    except TopologyError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(1) from None


@topology.command()
@click.argument("file", type=click.Path(dir_okay=False))
def check(file: str) -> None:
    """Validate FILE and show its switches (profile, what lanes they carry), hosts and lane paths.

    Exit 1: the file is invalid; exit 3: valid, but a lane it must carry needs a feature no
    switch on its path has, or the conntrack border's table has no ceiling (topologies/capcheck.py)."""
    topo = _load_or_exit(file)
    bypass = bypass_ports(topo)
    names = {s.dpid: s.name for s in topo.switches}
    click.echo(f"{topo.source}: topology {topo.name!r} is valid")
    click.echo(f"  switches ({len(topo.switches)}):")
    for sw in topo.switches:
        click.echo(f"    {sw.name:<10} dpid {sw.dpid:<6} profile {sw.caps.profile:<12} {carries(topo, sw)}{_sflow(sw)}")
    click.echo(
        f"  links: {len(topo.links)}, bypass ports: "
        + (", ".join(f"{names[d]}:{p}" for d in sorted(bypass) for p in sorted(bypass[d])) or "none")
    )
    click.echo("  middleboxes: " + (", ".join(f"{m.name}({m.kind})" for m in topo.middleboxes) or "none"))
    if topo.flow_label_experiments:
        ids = ", ".join(str(i) for i in topo.flow_label_experiments)
        click.echo(f"  ipv6 flow label: scitags, experiments {ids} (a mark may start an automatic lane)")
    click.echo(f"  edge router: {topo.edge.name} at {topo.edge.inside.attach}; lane pool {topo.lane_pool.prefix}")
    click.echo(f"  hosts ({len(topo.hosts)}):")
    paths = lane_paths(topo)
    for host in topo.hosts:
        path = paths[host.name]
        nat = " (NAT on lane)" if host.needs_nat else ""
        if isinstance(path, NoLanePath):
            lane = f"no lane: {path}"
        else:
            lane = f"lane {format_path(path)}{nat}"
        v6 = f" {host.iface.ip6} (no NAT)" if host.iface.ip6 is not None else ""
        click.echo(f"    {host.name:<10} {host.role:<8} {host.iface.ip!s:<18}{v6} at {host.iface.attach}  {lane}")
    ceiling = conntrack_ceiling_problem(topo)
    problems = lane_problems(topo) + _budget_lines(topo) + ([ceiling] if ceiling else [])
    for problem in problems:
        click.echo(problem, err=True)
    if problems:
        raise SystemExit(3)


def _budget_lines(topo: Topology) -> list[str]:
    """Per budgeted switch, its base flows against ``max_flows``; a problem when no lane fits."""
    if not budgeted(topo):
        return []
    from viplanes.controller.compile.budget import CompiledCosts  # os-ken's parser: only with budgets

    base = CompiledCosts(topo).base()
    problems = []
    for sw in topo.switches:
        cap = sw.caps.max_flows.total
        if cap is None:
            continue
        used = sum(n for (name, _), n in base.items() if name == sw.name)
        click.echo(f"  {sw.name}: {used} base flows of max_flows {cap}, {cap - used} left for lanes")
        if used >= cap:
            problems.append(f"{topo.source}: {sw.name}: max_flows {cap} does not even hold its {used} base flows")
    return problems


@topology.command("ct-limits")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("datapath", default="")
def ct_limits(file: str, datapath: str) -> None:
    """Print the ovs-appctl commands that set the border's conntrack zone limits, to run on the
    border's host when the controller cannot (``ct_limits_external: true``); DATAPATH is dpctl's
    (e.g. netdev@ovs-netdev for a userspace bridge). Run them again after vswitchd restarts.
    Exit 1: the file is invalid; exit 3: the border keeps no state."""
    from viplanes.controller.runtime.ctlimits import CHUNK, limit_arguments

    topo = _load_or_exit(file)
    args = limit_arguments(topo)
    if not args:
        click.echo(f"{file}: the border keeps no connection state: no limits to set", err=True)
        raise SystemExit(3)
    dp = [datapath] if datapath else []
    for i in range(0, len(args), CHUNK):
        click.echo(" ".join(["ovs-appctl", "dpctl/ct-set-limits", *dp, *args[i : i + CHUNK]]))
