"""`viplanes doctor`: after an install, one command that says what works and what to fix.

Checks the configuration file first (config.py), then database, PKI, topology, switches
and their features (features.py) and the clock. One line per check (ok / warn / FAIL, and the fix); ``--json`` for machines. Exit 0 when every
check is ok, 1 when only warnings remain, 4 when something FAILs.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from viplanes.cli.doctor.checks import FAIL, OK, WARN, Finding
from viplanes.cli.doctor.features import check_features
from viplanes.cli.doctor.service import ServiceView, service_view

EXIT_OK, EXIT_WARN, EXIT_FAIL = 0, 1, 4
DEFAULT_API = "http://127.0.0.1:8080"


def run_checks(
    db_url: str | None,
    pki_dir: Path | None,
    pins: tuple[str, ...],
    topology_path: str | None,
    api_url: str,
    max_skew_s: float,
    now: dt.datetime,
    ca_file: str | None = None,
    *,
    config_file: Path | None = None,
    insecure_tcp: bool = False,
    token: str | None = None,
) -> list[Finding]:
    """Every check, in the order an operator fixes things (database, PKI, topology, switches, clock).
    ``config_file``: the file in effect (a deployment must name its topology, campusfile.py);
    ``insecure_tcp``: the service's OpenFlow is plain TCP (no TLS to blame, no PKI to want);
    ``token``: an operator's, for the switches' and links' detail (``/api/v1/readiness``)."""
    from viplanes.cli.doctor import checks
    from viplanes.store.db import Database

    missing = checks.missing_sqlite_file(db_url)  # opening it would create an empty one
    db = Database(db_url, pool_size=2) if missing is None else None
    try:
        found = checks.check_database(db) if db is not None else [missing] if missing is not None else []
        live = db if db is not None and found[0].status == OK else None
        topology, loaded = checks.load_topology_checked(topology_path, config_file)
        found += checks.check_pki(pki_dir, pins, topology, now, insecure_tcp=insecure_tcp)
        found.append(loaded)
        if topology is not None:
            found.append(checks.check_conntrack_ceiling(topology))
            report, source, fix = checks.fetch_readiness(api_url, live, ca_file=ca_file, token=token)
            found += checks.check_switches(topology, report, source, insecure_tcp=insecure_tcp, fix=fix)
            found += check_features(topology, report)
        if live is not None:
            found.append(checks.check_clock(live, max_skew_s))
        return found
    finally:
        if db is not None:
            db.dispose()


def config_findings(ctx: click.Context) -> list[Finding]:
    """The configuration file the top-level --config (or its defaults) names, every table checked."""
    from viplanes.cli.doctor.config import check_config
    from viplanes.cli.main import COMMANDS

    root = ctx.find_root()
    group = root.command
    assert isinstance(group, click.Group)
    explicit = root.params.get("config_path")

    def command_of(table: str) -> click.Command | None:
        return group.get_command(root, table) if table in COMMANDS else None

    return [*check_config(explicit, command_of), settings_finding()]


def settings_finding() -> Finding:
    """The ``VIPLANES_*`` settings parsed as serve parses them (viplanes/cli/settingsload.py)."""
    from viplanes.cli.services import load
    from viplanes.cli.settingsload import BadSetting

    try:
        ps = load(api=True)
    except BadSetting as exc:
        return Finding("settings", FAIL, exc.message, "fix the variable named; viplanes config show lists them")
    return Finding("settings", OK, f"{len(ps.env.given)} set, the rest defaults (viplanes config show)")


def service_defaults(ctx: click.Context) -> tuple[ServiceView, Path | None]:
    """The service tables of the file the top-level command read, and that file's path."""
    from viplanes.cli.main import CONFIG_META

    loaded = ctx.meta.get(CONFIG_META)
    if loaded is None:
        return ServiceView(), None
    return service_view(loaded.tables), loaded.path


def exit_code(found: list[Finding]) -> int:
    statuses = {f.status for f in found}
    return EXIT_FAIL if FAIL in statuses else EXIT_WARN if WARN in statuses else EXIT_OK


@click.command("doctor")
@click.option("--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default ./viplanes.db)")
@click.option(
    "--pki",
    "pki_dir",
    envvar="VIPLANES_PKI",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="the controller's PKI directory (default: [serve] pki); env VIPLANES_PKI",
)
@click.option("--switch-cert-pin", "pins", multiple=True, metavar="SHA256", help="serve's fleet pins (repeatable)")
@click.option(
    "--topology",
    "topology_path",
    default=None,
    help="campus YAML (default: [serve] topology; without a config file, the bundled lab campus)",
)
@click.option(
    "--api", "api_url", envvar="VIPLANES_API_URL", default=DEFAULT_API, show_default=True, help="API base URL"
)
@click.option(
    "--ca-file",
    envvar="VIPLANES_CA_FILE",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="CA bundle an https --api is verified against (default: the system store); env VIPLANES_CA_FILE",
)
@click.option(
    "--token",
    envvar="VIPLANES_TOKEN",
    default=None,
    help="an operator's API token: the switches and links by name (/api/v1/readiness); env VIPLANES_TOKEN",
)
@click.option(
    "--max-clock-skew", type=click.FloatRange(0), default=5.0, show_default=True, help="seconds of skew that FAIL"
)
@click.option("--json", "as_json", is_flag=True, help="one JSON document instead of lines")
def doctor(
    db_url: str | None,
    pki_dir: Path | None,
    pins: tuple[str, ...],
    topology_path: str | None,
    api_url: str,
    ca_file: str | None,
    token: str | None,
    max_clock_skew: float,
    as_json: bool,
) -> None:
    """Check the config file, database, PKI, topology, switches, their features and the clock;
    print what to fix. Unless a flag or [doctor] says otherwise, the PKI, topology, pins, database
    and API are the ones the file's [serve] (or [controller], [api]) table gives the service."""
    ctx = click.get_current_context()
    found = config_findings(ctx)
    view, config_file = service_defaults(ctx)
    given: dict[str, Any] = {
        "db_url": db_url,
        "pki_dir": pki_dir,
        "pins": pins,
        "topology_path": topology_path,
        "api_url": api_url,
    }
    for name, value in view.values.items():
        if ctx.get_parameter_source(name) == ParameterSource.DEFAULT:
            given[name] = value
    if view.origin:
        used = ", ".join(f"{v} ({k})" for k, v in sorted(view.origin.items()) if given.get(k) == view.values[k])
        if used:
            found.append(Finding("config.service", OK, f"checking what the service reads: {used}"))
    found += run_checks(
        given["db_url"],
        Path(given["pki_dir"]) if given["pki_dir"] else None,
        tuple(given["pins"] or ()),
        given["topology_path"],
        given["api_url"],
        max_clock_skew,
        dt.datetime.now(dt.UTC),
        ca_file,
        config_file=config_file,
        insecure_tcp=view.insecure_tcp,
        token=token,
    )
    code = exit_code(found)
    if as_json:
        status = {EXIT_OK: "ok", EXIT_WARN: "warn", EXIT_FAIL: "fail"}[code]
        click.echo(json.dumps({"status": status, "checks": [f.as_dict() for f in found]}, indent=2))
    else:
        for f in found:
            click.echo(f.line())
    sys.exit(code)
