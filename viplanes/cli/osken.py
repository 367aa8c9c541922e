"""``python -m viplanes.cli.osken``: os-ken apps on their own (default forwarding only), for the lab's
default-path runs and tests that need a controller without lanes."""

from __future__ import annotations

import signal
import sys
from typing import Any

import click

from viplanes.cli.logopts import configure, log_options
from viplanes.cli.openflow_options import listener_security, openflow_security_options
from viplanes.cli.options import hostport_option
from viplanes.controller.openflow.launcher import DEFAULT_APPS, start_apps


@click.command()
@click.option("--listen", default="127.0.0.1:6653", show_default=True, help="OpenFlow listen address HOST:PORT.")
@click.option(
    "--app",
    "apps",
    multiple=True,
    default=DEFAULT_APPS,
    show_default=True,
    help="os-ken app module to load (repeatable).",
)
@openflow_security_options
@log_options
def run(
    listen: str,
    apps: tuple[str, ...],
    pki_dir: Any,
    insecure_tcp: bool,
    switch_cert_pins: tuple[str, ...],
    log_format: str,
    log_level: str,
) -> None:
    """Run os-ken apps in the foreground until SIGTERM/SIGINT (no topology: any dpid)."""
    host, port = hostport_option(listen, "--listen", 6653)
    security = listener_security(pki_dir, insecure_tcp, switch_cert_pins, None)
    configure(log_format, log_level, sys.stdout)
    from os_ken.lib import hub

    running = start_apps(apps, host, port, of_security=security)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        hub.joinall(running.threads)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        running.stop()


if __name__ == "__main__":
    run()
