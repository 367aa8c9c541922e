"""`viplanes principal|grant|lane|audit`: the API for people, with tables and exit codes.

Exit codes: 0 done (lane active or scheduled), 1 refused or failed (API error, lane failed),
3 the API could not be reached or no token is configured. Usage errors are click's 2.
``principal add`` talks to the database directly so the first operator can be bootstrapped.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from viplanes.client.http import ApiClient, ApiError
from viplanes.config import ClientConfig, ConfigError
from viplanes.domain.hostport import is_address
from viplanes.domain.values import is_decimal

TLS_VERIFY_EXIT = 76  # the API's certificate did not verify: not "unreachable" (3), a trust problem

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
)


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _short_time(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
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


def _record(row: dict[str, Any]) -> None:
    width = max(len(k) for k in row)
    for key, value in row.items():
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
            _fail(str(exc), 3)
        if not cfg.token:
            _fail("no token: set VIPLANES_TOKEN or token in ~/.config/viplanes/config.toml", 3)
        client = ApiClient(cfg)
        try:
            out = fn(client, **kwargs)
        except ApiError as exc:
            if exc.error == "tls_verify":
                _fail(str(exc), TLS_VERIFY_EXIT)
            _fail(str(exc), 3 if exc.status == 0 else 1)
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


def _rows(columns: tuple[str, ...], title: str | None = None) -> Callable[[list[dict[str, Any]]], None]:
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
    import time

    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.errors import VipError
    from viplanes.store import records as store
    from viplanes.store.db import Database

    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$", name):
        _fail("name: 1-64 letters, digits, _ . @ - (starting with a letter or digit)", 2)
    try:
        db = Database(db_url)
        db.create_all()
        with db.write() as s:
            now = time.time()
            _, token = store.create_principal(s, name, role, now)
            store.audit(s, now, "cli", "principal.create", f"principal:{name}", "done", role)
        db.dispose()
    except VipError as exc:
        _fail(exc.message)
    except SQLAlchemyError as exc:
        _fail(f"database: {exc.__class__.__name__}: {str(exc).splitlines()[0]}")
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
    return api.call("GET", "/principals"), _rows(("name", "role", "disabled", "created_at"))


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
    return api.call("POST", f"/principals/{name}/disable"), _record


@principal.command("whoami")
@api_command
def principal_whoami(api: ApiClient) -> Any:
    return api.call("GET", "/whoami"), lambda d: click.echo(f"{d['name']} ({d['role']})")


# --- grant -----------------------------------------------------------------------------------

GRANT_COLUMNS = (
    "id",
    "principal",
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
    """Grants: what a principal may ask lanes for (operators create and revoke)."""


@grant.command("create")
@click.option("--principal", required=True)
@click.option("--src", "src_prefixes", multiple=True, required=True, help="source host or prefix (repeat)")
@click.option("--dst", "dst_prefixes", multiple=True, required=True, help="destination prefix (repeat)")
@click.option("--protocol", "protocols", multiple=True, type=click.Choice(["tcp", "udp"]), default=("tcp",))
@click.option("--ports", required=True, help='e.g. "443,9000-9100"')
@click.option("--max-duration", "max_duration_s", type=click.IntRange(1), required=True, help="seconds")
@click.option("--max-rate", "max_rate_mbps", type=click.FloatRange(0, min_open=True), default=None)
@click.option("--max-lanes", type=click.IntRange(1), default=1)
@click.option("--valid-from", default=None, help="ISO 8601")
@click.option("--valid-until", default=None, help="ISO 8601")
@api_command
def grant_create(api: ApiClient, ports: str, **body: Any) -> Any:
    body["ports"] = [int(p) if is_decimal(p.strip()) else p.strip() for p in ports.split(",") if p.strip()]
    for key in ("src_prefixes", "dst_prefixes", "protocols"):
        body[key] = list(body[key])
    body = {k: v for k, v in body.items() if v is not None}
    return api.call("POST", "/grants", json=body), _record


@grant.command("list")
@click.option("--principal", default=None)
@click.option("--active", is_flag=True, help="only grants that can still allow lanes")
@api_command
def grant_list(api: ApiClient, principal: str | None, active: bool) -> Any:
    rows = api.call("GET", "/grants", params={"principal": principal, "active": "true" if active else None})
    return rows, _grant_rows


@grant.command("show")
@click.argument("grant_id", type=int)
@api_command
def grant_show(api: ApiClient, grant_id: int) -> Any:
    return api.call("GET", f"/grants/{grant_id}"), _record


@grant.command("revoke")
@click.argument("grant_id", type=int)
@api_command
def grant_revoke(api: ApiClient, grant_id: int) -> Any:
    """Revoke a grant; its live lanes end."""
    out = api.call("POST", f"/grants/{grant_id}/revoke")
    return out, lambda d: click.echo(f"grant {grant_id} revoked; lanes ended: {d['revoked_lanes'] or 'none'}")


# --- lane ------------------------------------------------------------------------------------


def _duration(value: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", value)
    if not m:
        raise click.BadParameter("a number of seconds, or with a unit: 90s, 10m, 2h, 1d")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _duration_of(value: str, option: str) -> int:
    """:func:`_duration` for an option parsed in the command body: one readable line, exit 2."""
    try:
        return _duration(value)
    except click.BadParameter as exc:
        _fail(f"{option}: {exc.message}", 2)


@click.group()
def lane() -> None:
    """VIP lanes: request one before a big transfer."""


@lane.command("request")
@click.option("--src", "src_ip", required=True, help="source host address (IPv4 or IPv6)")
@click.option(
    "--dst",
    "dst",
    default=None,
    help="destination address, or a host name (all its addresses, followed while the lane lives)",
)
@click.option("--dst-prefix", default=None, help="every address of this prefix")
@click.option("--protocol", type=click.Choice(["tcp", "udp"]), default="tcp")
@click.option("--dst-port", type=click.IntRange(1, 65535), default=None)
@click.option("--dst-ports", default=None, help="a range or list: 50000-51000 or 5201,9000-9100")
@click.option("--src-port", type=click.IntRange(1, 65535), default=None)
@click.option("--duration", "duration", default="3600", help="seconds or 10m/2h/1d")
@click.option("--start-at", default=None, help="ISO 8601 start (advance reservation)")
@click.option("--rate", "rate_mbps", type=click.FloatRange(0, min_open=True), default=None, help="Mbit/s cap")
@click.option("--purpose", required=True)
@click.option("--idempotency-key", default=None, help="retry-safe: the same key returns the first answer")
@click.option("--wait", is_flag=True, help="return when the lane is active or failed")
@click.option("--wait-timeout", type=float, default=None, help="seconds to wait (default: until start + 30 s)")
@api_command
def lane_request(
    api: ApiClient, duration: str, wait: bool, wait_timeout: float | None, idempotency_key: str | None, **body: Any
) -> Any:
    body["duration_s"] = _duration_of(duration, "--duration")
    dst = body.pop("dst")
    if dst is not None:
        body["dst_ip" if is_address(dst) else "dst_host"] = dst
    if body.get("dst_ports") is not None:
        items = [int(p) if is_decimal(p.strip()) else p.strip() for p in body["dst_ports"].split(",")]
        body["dst_ports"] = items if len(items) > 1 else items[0]
    body = {k: v for k, v in body.items() if v is not None}
    out = api.request_lane(body, idempotency_key)
    if wait and out["state"] not in ("active", "failed"):
        out = api.wait_lane(out, wait_timeout if wait_timeout is not None else _until_start(out) + 30.0)
    return out, _record, 1 if out["state"] in ("failed", "expired", "released", "revoked") else 0


def _until_start(lane: dict[str, Any]) -> float:
    import datetime as dt

    start = dt.datetime.fromisoformat(lane["starts_at"]).timestamp()
    return max(0.0, start - dt.datetime.now(dt.UTC).timestamp())


@lane.command("list")
@click.option("--state", default=None)
@click.option("--principal", default=None, help="(operators) only this principal's lanes")
@click.option("--limit", type=click.IntRange(1, 1000), default=100)
@api_command
def lane_list(api: ApiClient, state: str | None, principal: str | None, limit: int) -> Any:
    rows = api.call("GET", "/lanes", params={"state": state, "principal": principal, "limit": limit})
    return rows, _rows(LANE_COLUMNS)


@lane.command("show")
@click.argument("lane_id", type=int)
@api_command
def lane_show(api: ApiClient, lane_id: int) -> Any:
    return api.lane(lane_id), _record


@lane.command("extend")
@click.argument("lane_id", type=int)
@click.option("--by", "by", required=True, help="extra time: seconds or 10m/2h")
@api_command
def lane_extend(api: ApiClient, lane_id: int, by: str) -> Any:
    add = _duration_of(by, "--by")
    return api.call("POST", f"/lanes/{lane_id}/extend", json={"add_s": add}), _record


@lane.command("release")
@click.argument("lane_id", type=int)
@api_command
def lane_release(api: ApiClient, lane_id: int) -> Any:
    return api.call("POST", f"/lanes/{lane_id}/release"), _record


@lane.command("revoke")
@click.argument("lane_id", type=int)
@api_command
def lane_revoke(api: ApiClient, lane_id: int) -> Any:
    """(operators) end someone's lane."""
    return api.call("POST", f"/lanes/{lane_id}/revoke"), _record


@lane.command("stats")
@click.argument("lane_id", type=int)
@api_command
def lane_stats(api: ApiClient, lane_id: int) -> Any:
    return api.call("GET", f"/lanes/{lane_id}/stats"), _record


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
    return rows, _rows(("id", "at", "actor", "action", "target", "decision", "reason"))
