"""`viplanes controller ...`: run the OpenFlow controller on its own (no API, no database).

With ``--topology`` it installs the campus's base flows and reconciles every switch that connects;
without one every switch gets table-miss -> NORMAL only. Lanes come from the API process
(``viplanes serve`` embeds this same controller).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from viplanes.controller.security_cli import listener_security, openflow_security_options
from viplanes.hostport import hostport_option
from viplanes.lifecycle import wait_until_stopped


@click.group()
def controller() -> None:
    """The OpenFlow controller (os-ken 4.x, OpenFlow 1.3)."""


@controller.command()
@click.option("--listen", default="127.0.0.1:6653", show_default=True,
              help="OpenFlow listen address HOST:PORT.")
@click.option("--topology", "topology_path", type=click.Path(dir_okay=False), default=None,
              help="topology YAML; without it switches only get table-miss -> NORMAL")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False),
              default="INFO", show_default=True)
@openflow_security_options
def run(listen: str, topology_path: str | None, log_level: str, pki_dir: Path | None,
        insecure_tcp: bool, switch_cert_pins: tuple[str, ...]) -> None:
    """Run the controller in the foreground until SIGTERM/SIGINT."""
    host, port = hostport_option(listen, "--listen", 6653)
    topology = None
    if topology_path is not None:
        from viplanes.topologies.loader import TopologyError, load_topology

        try:
            topology = load_topology(topology_path)
        except (TopologyError, OSError) as exc:
            raise click.ClickException(f"topology: {str(exc).splitlines()[0]}") from None
    security = listener_security(pki_dir, insecure_tcp, switch_cert_pins, topology)
    logging.basicConfig(level=log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from viplanes.controller.embedded import EmbeddedController

    plane = EmbeddedController(topology, host=host, port=port, security=security)
    try:
        plane.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        wait_until_stopped()
    finally:
        plane.stop()
