"""`viplanes lab shell` and `lab clean`: the campus by hand, and what dead runs left behind.

Also the root check every `viplanes lab` command that builds a network makes first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from viplanes.domain.values import is_decimal
from viplanes.settings.environ import set_for_children

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TOPOLOGY = REPO / "topologies" / "campus.yaml"


@click.command("shell")
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_TOPOLOGY,
    show_default=True,
)
@click.option(
    "--controller",
    default=None,
    metavar="HOST:PORT",
    help="an OpenFlow controller already running (default: start viplanes serve)",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/tmp/viplanes-lab-shell"),
    show_default=True,
)
def shell(topology_path: Path, controller: str | None, work_dir: Path) -> None:
    """The campus with Mininet's CLI, torn down safely on exit (unlike `mn`, no global cleanup).

    Prints, last, a lane to try from the mininet> prompt, the console's address and the tokens.
    When switches do not connect, names the TLS cause and its fix."""
    need_root()
    need_tools()
    from mininet.cli import CLI

    from viplanes.lab.experiments import lab_grant_prefixes
    from viplanes.lab.net import build_network, clean_stale
    from viplanes.lab.services import IPERF_PORT, S3_PORT, start_cloud_services
    from viplanes.lab.shellinfo import banner, explain_unconnected
    from viplanes.lab.stack import StackError, start_stack
    from viplanes.topologies.loader import TopologyError, load_topology

    try:
        topo = load_topology(topology_path)
    except (TopologyError, OSError) as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from None
    clean_stale()
    stack = None
    openflow = ("127.0.0.1", 0)
    try:
        if controller:
            host, _, port = controller.rpartition(":")
            if not is_decimal(port):
                raise click.BadParameter("expected HOST:PORT", param_hint="--controller")
            openflow = (host or "127.0.0.1", int(port))
        else:
            src, dst = lab_grant_prefixes(topo)
            stack = start_stack(topology_path, work_dir / "service", src, dst, [str(IPERF_PORT), str(S3_PORT)])
            openflow = stack.openflow
            # `sh viplanes lane ...` at the mininet> prompt inherits these
            set_for_children({"VIPLANES_API_URL": stack.api_url, "VIPLANES_TOKEN": stack.researcher_token})
        with build_network(topo, *openflow, log_level="info") as lab:
            svc = start_cloud_services(lab, work_dir / "cloud")
            click.echo(
                f"cloud: iperf3 on {svc.ip}:{svc.iperf_port}, S3 on {svc.endpoint} "
                f"(bucket {svc.bucket}); bridges "
                f"{', '.join(lab.bridge(s.name) for s in topo.switches)}"
            )
            click.echo(
                banner(topo, *((stack.api_url, stack.researcher_token, stack.operator_token) if stack else (None,) * 3))
            )
            CLI(lab.net)
    except (StackError, RuntimeError) as exc:
        for line in explain_unconnected(str(exc), stack.log_path if stack else None, openflow):
            click.echo(f"cause: {line}", err=True)
        raise click.ClickException(str(exc).splitlines()[0]) from None
    finally:
        if stack is not None:
            stack.stop()


@click.command("clean")
def clean() -> None:
    """Remove bridges, ports and processes of lab runs whose process is gone (never live ones)."""
    need_root()
    from viplanes.lab.net import clean_stale

    removed = clean_stale()
    click.echo("\n".join(removed) if removed else "nothing stale")


def need_root() -> None:
    """Exit 1 with one line unless root: every lab command builds namespaces and OVS bridges."""
    if os.geteuid() != 0:
        click.echo("Error: the lab needs root (network namespaces and OVS bridges)", err=True)
        sys.exit(1)


def need_tools() -> None:
    """Exit 1 naming every missing tool (rclone, Open vSwitch, ...) before ~40 s of building."""
    from viplanes.lab.prereqs import missing

    lines = missing()
    if lines:
        for line in lines:
            click.echo(f"Error: {line}", err=True)
        sys.exit(1)
