"""`viplanes controller run|cluster`: the OpenFlow controller on its own (``run``: no API, no
database) or as one node of the split deployment (``cluster``: master by a PostgreSQL lease).

With ``--topology`` it installs the campus's base flows and reconciles every switch that connects;
without one every switch gets table-miss -> NORMAL only. Lanes come from the API process
(``viplanes serve`` embeds this same controller).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from viplanes.cli import services
from viplanes.cli.clockopt import max_clock_skew_option, refuse_skewed_clock
from viplanes.cli.logopts import configure, log_options
from viplanes.cli.openflow_options import listener_security, openflow_security_options
from viplanes.cli.options import hostport_option
from viplanes.lifecycle import wait_until_stopped


@click.group()
def controller() -> None:
    """The OpenFlow controller (os-ken 4.x, OpenFlow 1.3)."""


@controller.command()
@click.option("--listen", default="127.0.0.1:6653", show_default=True, help="OpenFlow listen address HOST:PORT.")
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="topology YAML; without it switches only get table-miss -> NORMAL",
)
@openflow_security_options
@log_options
def run(
    listen: str,
    topology_path: str | None,
    pki_dir: Path | None,
    insecure_tcp: bool,
    switch_cert_pins: tuple[str, ...],
    log_format: str,
    log_level: str,
) -> None:
    """Run the controller in the foreground until SIGTERM/SIGINT."""
    host, port = hostport_option(listen, "--listen", 6653)
    topology = None
    if topology_path is not None:
        from viplanes.cli.serve import with_zone_base_setting
        from viplanes.topologies.loader import TopologyError, load_topology

        try:
            topology = with_zone_base_setting(load_topology(topology_path))
        except (TopologyError, OSError, ValueError) as exc:
            raise click.ClickException(f"topology: {str(exc).splitlines()[0]}") from None
    security = listener_security(pki_dir, insecure_tcp, switch_cert_pins, topology)
    configure(log_format, log_level, sys.stdout)
    from viplanes.cli.openflow_options import link_settings
    from viplanes.controller.openflow.embedded import EmbeddedController, embedded_runtime

    ps = services.load(api=False)
    runtime = embedded_runtime(topology, learn_features=ps.learn_features, links=link_settings(ps.env))
    plane = EmbeddedController(runtime, host=host, port=port, security=security)
    try:
        plane.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        wait_until_stopped()
    finally:
        plane.stop()


@controller.command("cluster")
@click.option(
    "--db",
    "db_url",
    envvar="VIPLANES_DB_URL",
    required=True,
    help="shared database URL (postgresql://...); all controllers and API processes use it",
)
@click.option("--openflow", "of_addr", default="127.0.0.1:6653", show_default=True, help="OpenFlow listen HOST:PORT")
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="topology YAML (default: the campus)",
)
@click.option(
    "--tick",
    "tick_s",
    type=click.FloatRange(0.05, 60),
    default=0.5,
    show_default=True,
    help="scheduler period while master, seconds",
)
@click.option(
    "--metrics",
    "metrics_addr",
    envvar="VIPLANES_CONTROLLER_METRICS",
    default=None,
    help="serve Prometheus /metrics on HOST:PORT: master or standby, switches, and on the master the "
    "automation counters (off by default; an address off loopback needs --metrics-tls-cert and -key)",
)
@click.option(
    "--metrics-tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="certificate (PEM) for --metrics",
)
@click.option(
    "--metrics-tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="private key (PEM) for --metrics",
)
@max_clock_skew_option
@openflow_security_options
@log_options
def cluster(
    db_url: str,
    of_addr: str,
    topology_path: str | None,
    tick_s: float,
    metrics_addr: str | None,
    metrics_tls_cert: Path | None,
    metrics_tls_key: Path | None,
    max_skew_s: float,
    pki_dir: Path | None,
    insecure_tcp: bool,
    switch_cert_pins: tuple[str, ...],
    log_format: str,
    log_level: str,
) -> None:
    """A controller of a cluster: master of every switch while it holds the lease, else standby."""
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.cli.serve import load_topology_option
    from viplanes.cluster.node import ControllerNode
    from viplanes.controller.openflow.embedded import EmbeddedController, embedded_runtime
    from viplanes.controller.openflow.roles import RoleController
    from viplanes.domain.clock import SteadyClock
    from viplanes.store.db import Database

    configure(log_format, log_level)
    # the API processes' settings (VIPLANES_DNS_TTL_*, VIPLANES_MAX_LANE_MATCHES, [auto], [sflow]):
    # the master's name watcher and automation act as serve's do; OIDC is the API's, not read here
    ps = services.load(db_url, api=False)
    host, port = hostport_option(of_addr, "--openflow", 6653)
    metrics_at = _metrics_address(metrics_addr, metrics_tls_cert, metrics_tls_key)
    topology = load_topology_option(topology_path)
    security = listener_security(pki_dir, insecure_tcp, switch_cert_pins, topology)
    try:
        db = Database(db_url)
        db.create_all()
        refuse_skewed_clock(db, max_skew_s)
    except SQLAlchemyError as exc:
        raise click.ClickException(f"database: {str(exc).splitlines()[0]}") from None
    clock = SteadyClock()  # lane windows and hard timeouts on one clock a step cannot move
    from viplanes.cli.openflow_options import link_settings

    # the link options it was given (hold-down, cabling probes), as serve and `controller run` do
    runtime = embedded_runtime(topology, clock=clock, links=link_settings(ps.env))
    roles = RoleController(runtime)  # the switches' events, role-aware; the listener's below
    plane = EmbeddedController(runtime, host=host, port=port, events=roles, security=security)
    manager = services.lane_service(ps, db, plane, topology, clock)
    plane.attach_source(manager.desired_lanes)
    automation = services.automation_role(ps, manager, topology, clock)
    node = ControllerNode(db, plane, manager, tick_s, automation=automation, roles=roles)
    retention = services.retention_runner(ps, db)
    metrics = None
    try:
        if metrics_at is not None:
            metrics = _serve_metrics(metrics_at, roles, node.automation, metrics_tls_cert, metrics_tls_key)
        node.start()
    except (RuntimeError, OSError) as exc:
        if metrics is not None:
            metrics.stop()
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"viplanes controller: OpenFlow {host}:{port}  holder {node.lease.holder}  db {db.display_url}",
        err=True,
    )
    retention.start()
    try:
        wait_until_stopped()
    finally:
        retention.stop()
        if metrics is not None:
            metrics.stop()
        node.stop()
        if node.automation is not None:
            node.automation.close()
        db.dispose()


def _metrics_address(addr: str | None, cert: Path | None, key: Path | None) -> tuple[str, int] | None:
    """``--metrics`` checked before anything starts, as the API's listener is (viplanes/cli/https.py):
    both TLS files or neither, files that load, and no plain HTTP off loopback (exit 78): the
    counters name switches and the reasons forged datagrams were refused."""
    from viplanes.cli.config.file import ConfigFileError
    from viplanes.cli.https import is_loopback, server_context

    if (cert is None) != (key is None):
        raise click.UsageError("--metrics-tls-cert and --metrics-tls-key go together")
    if addr is None:
        if cert is not None:
            raise click.UsageError("--metrics-tls-cert needs --metrics HOST:PORT")
        return None
    host, port = hostport_option(addr, "--metrics")
    if cert is not None and key is not None:
        try:
            server_context(cert, key)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ConfigFileError(f"--metrics-tls-cert {cert} --metrics-tls-key {key}: {exc}") from None
    elif not is_loopback(host):
        raise ConfigFileError(
            f"--metrics {addr}: plain HTTP off loopback; give --metrics-tls-cert and --metrics-tls-key"
        )
    return host, port


def _serve_metrics(at: tuple[str, int], plane: Any, role: Any, cert: Path | None, key: Path | None) -> Any:
    from prometheus_client import CollectorRegistry

    from viplanes.cluster.metrics import ControllerCollector, MetricsServer

    registry = CollectorRegistry()
    registry.register(ControllerCollector(plane, role))
    server = MetricsServer(at[0], at[1], registry, cert, key)
    click.echo(f"viplanes controller: metrics {'https' if cert else 'http'}://{at[0]}:{server.port}/metrics", err=True)
    return server
