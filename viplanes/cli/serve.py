"""`viplanes serve`: the embedded controller, the lifecycle scheduler and the API in one process.

Order matters: the controller learns where the desired lanes come from (the database) before it
starts listening, so the first switch that connects is reconciled against the store; the API
opens last, when everything it calls is up.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from viplanes.cli.apiserver import ServerLimits, create_api_server
from viplanes.cli.https import api_tls_options, listen_tls
from viplanes.cli.logopts import configure, log_options
from viplanes.cli.openflow_options import openflow_security_options
from viplanes.cli.options import hostport_option
from viplanes.cli.settingsload import process_settings
from viplanes.dataplane.base import Dataplane
from viplanes.domain.clock import SteadyClock

log = logging.getLogger("viplanes.cli.serve")


def config_file_in_effect() -> Path | None:
    """The configuration file the top-level command read (None: none, or called without it)."""
    from viplanes.cli.main import CONFIG_META

    ctx = click.get_current_context(silent=True)
    loaded = ctx.meta.get(CONFIG_META) if ctx is not None else None
    return loaded.path if loaded is not None else None


def load_topology_option(given: str | None, table: str = "serve", for_switches: bool = True) -> Any:
    """The campus this command runs (campusfile.py: a deployment names its file)."""
    from viplanes.cli.campusfile import choose_topology
    from viplanes.cli.config.file import ConfigFileError
    from viplanes.topologies.loader import TopologyError, load_topology

    choice = choose_topology(given, config_file_in_effect(), table, for_switches)
    if choice.path is None:
        raise ConfigFileError(choice.problem)
    if choice.warning:
        log.warning("%s", choice.warning)
    path = choice.path
    try:
        return with_zone_base_setting(load_topology(path))
    except TopologyError as exc:
        raise click.ClickException(f"topology: {str(exc).splitlines()[0]}") from None
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"topology: {exc}") from None


def with_zone_base_setting(topology: Any) -> Any:
    """The topology with the deployment's conntrack zone base when the setting gives one
    (``VIPLANES_CT_ZONE_BASE``, ``[switches] ct_zone_base``; viplanes/cli/services.py)."""
    from viplanes.config import ct_zone_base
    from viplanes.topologies.model import with_ct_zone_base

    base = ct_zone_base(process_settings())
    return topology if base is None else with_ct_zone_base(topology, base)


def _make_dataplane(
    kind: str, topology: Any, openflow: tuple[str, int], security: Any, clock: Callable[[], float], learn: bool
) -> Dataplane:
    if kind == "memory":
        from viplanes.dataplane.memory import MemoryDataplane

        return MemoryDataplane()
    try:
        from viplanes.controller.openflow.embedded import EmbeddedController, embedded_runtime
    except ImportError as exc:
        raise click.ClickException(
            f"the embedded controller is not available ({exc}); use --dataplane memory for an API-only server"
        ) from None
    from viplanes.cli.openflow_options import link_settings

    runtime = embedded_runtime(topology, clock=clock, learn_features=learn, links=link_settings(process_settings()))
    return EmbeddedController(runtime, host=openflow[0], port=openflow[1], security=security)


def _of_mode(dataplane: str, security: Any) -> str:
    if dataplane != "openflow":
        return dataplane
    return "TLS" if security.tls is not None else "INSECURE plain TCP"


# SystemExit, not an exception of our own: the API server's loop (cheroot) stops on SystemExit and
# KeyboardInterrupt only, and logs and swallows anything else
SIGTERM_EXIT = 128 + signal.SIGTERM


def _stop_on_sigterm() -> None:
    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


@click.command()
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="topology YAML; required when a config file is in effect (default without one: the bundled lab campus)",
)
@click.option(
    "--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default: sqlite file ./viplanes.db)"
)
@click.option("--api", "api_addr", default="127.0.0.1:8080", show_default=True, help="API listen HOST:PORT")
@click.option("--openflow", "of_addr", default="127.0.0.1:6653", show_default=True, help="OpenFlow listen HOST:PORT")
@click.option(
    "--dataplane",
    type=click.Choice(["openflow", "memory"]),
    default="openflow",
    show_default=True,
    help="memory: no controller, lanes are only remembered (API demos, tests)",
)
@click.option("--threads", type=click.IntRange(1, 256), default=8, show_default=True, help="API worker threads")
@click.option(
    "--tick",
    "tick_s",
    type=click.FloatRange(0.05, 60),
    default=0.5,
    show_default=True,
    help="scheduler period, seconds",
)
@openflow_security_options
@log_options
@api_tls_options
def serve(
    topology_path: str | None,
    db_url: str | None,
    api_addr: str,
    of_addr: str,
    dataplane: str,
    threads: int,
    tick_s: float,
    pki_dir: Path | None,
    insecure_tcp: bool,
    switch_cert_pins: tuple[str, ...],
    log_format: str,
    log_level: str,
) -> None:
    """Run the controller and the API in one process until SIGINT/SIGTERM."""
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.cli import services
    from viplanes.lanes.membersweep import MembershipSweeper
    from viplanes.lanes.names import NameWatcher
    from viplanes.lanes.scheduler import Scheduler

    configure(log_format, log_level)
    api_host, api_port = hostport_option(api_addr, "--api")
    tls = listen_tls(api_host, "--api")
    of = hostport_option(of_addr, "--openflow")
    ps = services.load(db_url or "", api=True, migrate=True)  # a bad value: one line, exit 78
    config = ps.app
    topology = load_topology_option(topology_path, "serve", for_switches=dataplane == "openflow")
    security = None
    if dataplane == "openflow":
        from viplanes.cli.openflow_options import listener_security

        security = listener_security(pki_dir, insecure_tcp, switch_cert_pins, topology)
    # one clock for the lane service and the controller: lane windows and hard timeouts agree,
    # and a wall-clock step moves neither (viplanes/domain/clock.py)
    clock = SteadyClock()
    plane = _make_dataplane(dataplane, topology, of, security, clock, ps.learn_features)
    try:
        app = services.app(ps, plane, topology, clock)
    except SQLAlchemyError as exc:
        raise click.ClickException(f"database: {str(exc).splitlines()[0]}") from None
    ctx = app.extensions["viplanes"]
    plane.attach_source(ctx.manager.desired_lanes)
    _stop_on_sigterm()
    scheduler = Scheduler(ctx.manager, interval_s=tick_s)
    names = NameWatcher(ctx.manager)
    # lanes under group grants end when the holder's membership evidence runs out (issue 30)
    sweeper = MembershipSweeper(ctx.manager, config.oidc.membership_sweep_s) if config.oidc is not None else None
    retention = services.retention_runner(ps, ctx.db)
    automation = services.automation(ps, ctx.manager, clock)
    from viplanes.auto.metrics import AutomationCollector

    ctx.metrics.registry.register(AutomationCollector(automation))  # /metrics: viplanes_auto_*
    detection = services.sflow_detection(ps, clock, automation.acceptor, topology)
    if detection is not None:
        from viplanes.detection.sflow.metrics import SflowCollector

        ctx.metrics.registry.register(SflowCollector(detection))  # /metrics: viplanes_sflow_*
    server = None
    started = False
    try:
        try:
            plane.start()  # the memory data plane has nothing to start
        except (RuntimeError, OSError) as exc:
            raise click.ClickException(str(exc)) from None
        started = True
        scheduler.start()
        names.start()
        retention.start()
        automation.start()
        if sweeper is not None:
            sweeper.start()
        if detection is not None:
            try:
                detection.start()
            except OSError as exc:
                raise click.ClickException(str(exc)) from None
        try:
            server = create_api_server(app, api_host, api_port, tls, ServerLimits(threads=threads))
        except OSError as exc:
            raise click.ClickException(f"--api {api_addr}: {exc.strerror or exc}") from None
        click.echo(
            f"viplanes: API {'https' if tls else 'http'}://{api_host}:{api_port}  OpenFlow {of[0]}:{of[1]} ({_of_mode(dataplane, security)})  "
            f"topology {topology.name}  db {ctx.db.display_url}",
            err=True,
        )
        sys.stderr.flush()
        server.run()  # SIGTERM/SIGINT: stops accepting, in-flight requests finish (ServerLimits.shutdown_s)
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # our SIGTERM handler's: a requested stop is a clean exit (0)
        if exc.code != SIGTERM_EXIT:
            raise
    finally:
        if server is not None:
            server.stop()
        scheduler.stop()
        names.stop()
        retention.stop()
        automation.stop()
        if sweeper is not None:
            sweeper.stop()
        if detection is not None:
            detection.stop()
        if started:
            plane.stop()
        ctx.db.dispose()
