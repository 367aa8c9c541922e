"""`viplanes principal|grant|lane|audit`: the API for people, with tables and exit codes.

Exit codes (``viplanes.cli.exitcodes``, one table in docs/operating.md): 0 done, 1 refused or
failed, 2 usage, 3 the API could not be reached, 4 no token, 5 the client config file is unusable,
6 the campus login failed or expired. With no API token given, the stored `viplanes login` is used.
``principal add`` talks to the database directly so the first operator can be bootstrapped.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import click

from viplanes.cli import exitcodes
from viplanes.cli.autoopts import auto_options, split_auto
from viplanes.client.http import ApiClient, ApiError
from viplanes.client.login import LoginError, bearer_for
from viplanes.config import ClientConfig, ConfigError
from viplanes.domain.values import is_decimal

LANE_COLUMNS = (
    "id",
    "principal",
    "state",
    "src_ip",
    "dst_ip",
    "dst_host",
    "protocol",
    "dst_ports",
    "nat_ip",
    "starts_at",
    "expires_at",
    "reason",
    "trigger",
)


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _short_time(value: Any) -> str:
    if isinstance(value, dict) and "kind" in value:  # an automatic lane's trigger
        return f"{value['kind']} (grant {value.get('grant_id')})"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, float):  # 37.54107099996418 -> 37.5411
        return f"{value:g}"
    if isinstance(value, str) and re.match(r"^\d{4}-\d\d-\d\dT", value):
        return value[:19].replace("T", " ") + "Z"
    return "" if value is None else str(value)


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...], title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*[_short_time(row.get(col)) for col in columns])
    Console(width=200).print(t)


def show_record(row: dict[str, Any]) -> None:
    width = max(len(k) for k in row)
    for key, value in row.items():
        if key.endswith("_ms") and isinstance(value, float):
            shown = f"{value:.1f}"  # activation_ms 37.5: a tenth of a millisecond is all it means
        else:
            shown = ", ".join(map(str, value)) if isinstance(value, list) else _short_time(value)
        click.echo(f"{key.ljust(width)}  {shown}")


def api_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --api-url/--token/--json and turns API errors into one line and an exit code."""

    @click.option(
        "--api-url", envvar="VIPLANES_API_URL", default=None, help="default: config file or http://127.0.0.1:8080"
    )
    @click.option("--token", envvar="VIPLANES_TOKEN", default=None, help="bearer token (default: config file)")
    @click.option("--json", "as_json", is_flag=True, help="print the raw JSON answer")
    @click.option(
        "--ca-file",
        envvar="VIPLANES_CA_FILE",
        default=None,
        help="CA the API's certificate must chain to [default: system]",
    )
    @functools.wraps(fn)
    def wrapper(api_url: str | None, token: str | None, as_json: bool, ca_file: str | None, **kwargs: Any) -> None:
        try:
            cfg = ClientConfig.load(api_url, token, ca_file)
        except ConfigError as exc:
            fail(str(exc), exitcodes.BAD_CONFIG)
        try:  # an explicit API token wins; else the stored campus login (`viplanes login`)
            bearer = bearer_for(cfg.token)
        except LoginError as exc:
            fail(str(exc), exitcodes.LOGIN)
        if not cfg.token and bearer is None:
            fail(
                "no token: run `viplanes login`, or set VIPLANES_TOKEN or token in ~/.config/viplanes/config.toml",
                exitcodes.NO_TOKEN,
            )
        client = ApiClient(cfg, bearer=bearer)
        try:
            out = fn(client, **kwargs)
        except ApiError as exc:
            if exc.error == "login_expired":
                fail(str(exc), exitcodes.LOGIN)
            if exc.error == "tls_verify":
                fail(str(exc), exitcodes.TLS_VERIFY)
            if exc.error in ("bad_url", "wrong_scheme"):  # the URL is wrong: fix it, do not retry
                fail(str(exc), exitcodes.USAGE)
            fail(str(exc), exitcodes.UNREACHABLE if exc.status == 0 else exitcodes.REFUSED)
        finally:
            client.session.close()
        if out is None:
            return
        data, show, *rest = out
        if as_json:
            click.echo(json.dumps(data, indent=2))
        else:
            show(data)
        if rest and rest[0]:
            sys.exit(rest[0])

    return wrapper


def show_rows(columns: tuple[str, ...], title: str | None = None) -> Callable[[list[dict[str, Any]]], None]:
    return lambda rows: _table(rows, columns, title)


# --- principal -------------------------------------------------------------------------------


@click.group()
def principal() -> None:
    """Principals (people and scripts) and their tokens."""


@principal.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(["operator", "researcher"]), required=True)
@click.option("--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default ./viplanes.db)")
def principal_add(name: str, role: str, db_url: str | None) -> None:
    """Create a principal straight in the database (bootstrap); prints its token last."""
    from viplanes.cli.extras import require

    require("principal add", "sqlalchemy")
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.errors import VipError
    from viplanes.store import records as store
    from viplanes.store.db import Database

    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$", name):
        fail("name: 1-64 letters, digits, _ . @ - (starting with a letter or digit)", 2)
    try:
        db = Database(db_url)
        db.create_all()
        with db.write() as s:
            now = time.time()
            _, token = store.create_principal(s, name, role, now)
            store.audit(s, now, "cli", "principal.create", f"principal:{name}", "done", role)
        db.dispose()
    except VipError as exc:
        fail(exc.message)
    except SQLAlchemyError as exc:
        fail(f"database: {exc.__class__.__name__}: {str(exc).splitlines()[0]}")
    click.echo(f"created {role} {name}; its token is shown once, store it now:", err=True)
    click.echo(token)


@principal.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["operator", "researcher"]), required=True)
@api_command
def principal_create(api: ApiClient, name: str, role: str) -> Any:
    """Create a principal over the API (operators); prints its token last."""
    p = api.call("POST", "/principals", json={"name": name, "role": role})

    def show(d: dict[str, Any]) -> None:  # the token alone on stdout, for scripts
        click.echo(f"created {d['role']} {d['name']}; token shown once:", err=True)
        click.echo(d["token"])

    return p, show


@principal.command("list")
@api_command
def principal_list(api: ApiClient) -> Any:
    """List principals (operators)."""
    return api.call("GET", "/principals"), show_rows(("name", "role", "disabled", "created_at"))


@principal.command("rotate")
@click.argument("name")
@api_command
def principal_rotate(api: ApiClient, name: str) -> Any:
    """Replace NAME's tokens with a new one (printed last)."""
    return api.call("POST", f"/principals/{name}/rotate"), lambda d: click.echo(d["token"])


@principal.command("disable")
@click.argument("name")
@api_command
def principal_disable(api: ApiClient, name: str) -> Any:
    """Disable NAME: its tokens stop working, its lanes end (operators)."""
    return api.call("POST", f"/principals/{name}/disable"), show_record


@principal.command("whoami")
@api_command
def principal_whoami(api: ApiClient) -> Any:
    """Print who the token belongs to, and its role."""
    return api.call("GET", "/whoami"), lambda d: click.echo(f"{d['name']} ({d['role']})")


# --- grant -----------------------------------------------------------------------------------

GRANT_COLUMNS = (
    "id",
    "principal",
    "group",
    "state",
    "src_prefixes",
    "dst_prefixes",
    "protocols",
    "ports",
    "max_duration_s",
    "max_lanes",
    "valid_until",
)


def _grant_rows(rows: list[dict[str, Any]]) -> None:
    flat = [{k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in r.items()} for r in rows]
    _table(flat, GRANT_COLUMNS)


@click.group()
def grant() -> None:
    """Grants: what a principal or a group may ask lanes for (operators create and revoke)."""


@grant.command("create")
@click.option("--principal", default=None, help="who may request the lanes")
@click.option("--group", default=None, help="instead of --principal: every member of this provider group")
@click.option("--src", "src_prefixes", multiple=True, required=True, help="source host or prefix (repeat)")
@click.option("--dst", "dst_prefixes", multiple=True, required=True, help="destination prefix (repeat)")
@click.option(
    "--protocol", "protocols", multiple=True, type=click.Choice(["tcp", "udp"]), default=("tcp",), help="(repeat)"
)
@click.option("--ports", required=True, help='e.g. "443,9000-9100"')
@click.option(
    "--max-duration", "max_duration_s", type=click.IntRange(1), required=True, help="longest lane, in seconds"
)
@click.option(
    "--max-rate", "max_rate_mbps", type=click.FloatRange(0, min_open=True), default=None, help="Mbit/s cap per lane"
)
@click.option("--max-lanes", type=click.IntRange(1), default=1, help="live lanes at once")
@click.option("--valid-from", default=None, help="ISO 8601")
@click.option("--valid-until", default=None, help="ISO 8601")
@auto_options
@api_command
def grant_create(api: ApiClient, ports: str, **body: Any) -> Any:
    """Allow a principal, or every member of a provider group, to request lanes from SRC to
    DST on PORTS (operators).

    Every lane the principal asks for must lie inside one grant: its source, destination,
    protocol, ports, duration (--max-duration, seconds) and count (--max-lanes live at once).
    Example: grant create --principal bob --src 10.1.0.10/32 --dst 203.0.113.0/24 --ports 5201
    --max-duration 7200 --max-lanes 2; or --group hpc-users instead of --principal (members
    signed in at the campus provider; docs/identity.md).
    """
    if (body["principal"] is None) == (body["group"] is None):
        raise click.UsageError("give exactly one of --principal and --group")
    body["ports"] = [int(p) if is_decimal(p.strip()) else p.strip() for p in ports.split(",") if p.strip()]
    for key in ("src_prefixes", "dst_prefixes", "protocols"):
        body[key] = list(body[key])
    auto = split_auto(body)
    body = {k: v for k, v in body.items() if v is not None}
    made = api.call("POST", "/grants", json=body)
    if auto:  # a second call: the grant exists even if its automation policy is refused
        made["auto"] = api.call("PUT", f"/grants/{made['id']}/auto", json={"enabled": False, **auto})
    return made, show_record


@grant.command("list")
@click.option("--principal", default=None, help="only this principal's grants")
@click.option("--active", is_flag=True, help="only grants that can still allow lanes")
@api_command
def grant_list(api: ApiClient, principal: str | None, active: bool) -> Any:
    """List grants (operators: all, or one principal's; researchers: their own)."""
    rows = api.call("GET", "/grants", params={"principal": principal, "active": "true" if active else None})
    return rows, _grant_rows


@grant.command("show")
@click.argument("grant_id", type=int)
@api_command
def grant_show(api: ApiClient, grant_id: int) -> Any:
    """Show one grant."""
    return api.call("GET", f"/grants/{grant_id}"), show_record


@grant.command("revoke")
@click.argument("grant_id", type=int)
@api_command
def grant_revoke(api: ApiClient, grant_id: int) -> Any:
    """Revoke a grant; its live lanes end."""
    out = api.call("POST", f"/grants/{grant_id}/revoke")
    return out, lambda d: click.echo(f"grant {grant_id} revoked; lanes ended: {d['revoked_lanes'] or 'none'}")


# --- audit -----------------------------------------------------------------------------------


@click.command()
@click.option("--actor", default=None)
@click.option("--action", default=None, help="e.g. lane.request, grant.revoke")
@click.option("--decision", type=click.Choice(["allow", "deny", "done", "failed"]), default=None)
@click.option("--since", default=None, help="ISO 8601")
@click.option("--limit", type=click.IntRange(1, 1000), default=50)
@api_command
def audit(api: ApiClient, **params: Any) -> Any:
    """The decision log, newest first (operators)."""
    rows = api.call("GET", "/audit", params=params)
    return rows, show_rows(("id", "at", "actor", "action", "target", "decision", "reason"))
