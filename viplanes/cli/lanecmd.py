"""`viplanes lane`: request, watch, extend and end lanes (exit codes: ``viplanes.cli.exitcodes``)."""

from __future__ import annotations

import re
import time
from typing import Any

import click

from viplanes.cli.client import LANE_COLUMNS, api_command, fail, show_record, show_rows
from viplanes.client.http import ApiClient
from viplanes.domain.hostport import is_address
from viplanes.domain.values import is_decimal

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
        fail(f"{option}: {exc.message}", 2)


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
@click.option("--protocol", type=click.Choice(["tcp", "udp"]), default="tcp", show_default=True, help="transport")
@click.option("--dst-port", type=click.IntRange(1, 65535), default=None, help="one destination port")
@click.option("--dst-ports", default=None, help="a range or list: 50000-51000 or 5201,9000-9100")
@click.option("--src-port", type=click.IntRange(1, 65535), default=None, help="only this source port")
@click.option("--duration", "duration", default="3600", help="seconds or 10m/2h/1d")
@click.option("--start-at", default=None, help="ISO 8601 start (advance reservation)")
@click.option("--rate", "rate_mbps", type=click.FloatRange(0, min_open=True), default=None, help="Mbit/s cap")
@click.option("--purpose", required=True, help="why (kept in the audit log)")
@click.option("--idempotency-key", default=None, help="retry-safe: the same key returns the first answer")
@click.option(
    "--wait",
    is_flag=True,
    help="return when the lane is active or failed; a 503 with Retry-After (switches not ready) is retried",
)
@click.option(
    "--wait-timeout", type=float, default=None, help="seconds to wait in all (default: 30 s, or until start + 30 s)"
)
@api_command
def lane_request(
    api: ApiClient, duration: str, wait: bool, wait_timeout: float | None, idempotency_key: str | None, **body: Any
) -> Any:
    """Ask for a lane from --src to --dst (an address, a host name or --dst-prefix) on a port.

    It must lie inside one of your grants. Example: lane request --src 10.1.0.10
    --dst 203.0.113.10 --dst-port 5201 --duration 1h --purpose "upload run 7" --wait
    """
    body["duration_s"] = _duration_of(duration, "--duration")
    dst = body.pop("dst")
    if dst is not None:
        body["dst_ip" if is_address(dst) else "dst_host"] = dst
    if body.get("dst_ports") is not None:
        items = [int(p) if is_decimal(p.strip()) else p.strip() for p in body["dst_ports"].split(",")]
        body["dst_ports"] = items if len(items) > 1 else items[0]
    body = {k: v for k, v in body.items() if v is not None}
    started = time.monotonic()  # --wait: one budget for Retry-After answers and activation
    out = api.request_lane(
        body, idempotency_key, retry_for_s=(30.0 if wait_timeout is None else wait_timeout) if wait else 0.0
    )
    if wait and out["state"] not in ("active", "failed"):
        budget = wait_timeout - (time.monotonic() - started) if wait_timeout is not None else None
        out = api.wait_lane(out, max(0.0, budget) if budget is not None else _until_start(out) + 30.0)
    return out, show_record, 1 if out["state"] in ("failed", "expired", "released", "revoked") else 0


def _until_start(lane: dict[str, Any]) -> float:
    import datetime as dt

    start = dt.datetime.fromisoformat(lane["starts_at"]).timestamp()
    return max(0.0, start - dt.datetime.now(dt.UTC).timestamp())


@lane.command("list")
@click.option("--state", default=None, help="only lanes in this state (e.g. active, scheduled)")
@click.option("--principal", default=None, help="(operators) only this principal's lanes")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="at most this many")
@api_command
def lane_list(api: ApiClient, state: str | None, principal: str | None, limit: int) -> Any:
    """List lanes, newest first (researchers see their own)."""
    rows = api.call("GET", "/lanes", params={"state": state, "principal": principal, "limit": limit})
    return rows, show_rows(LANE_COLUMNS)


@lane.command("show")
@click.argument("lane_id", type=int)
@api_command
def lane_show(api: ApiClient, lane_id: int) -> Any:
    """Show one lane: its state, matches, expiry and reason."""
    return api.lane(lane_id), show_record


@lane.command("extend")
@click.argument("lane_id", type=int)
@click.option("--by", "by", required=True, help="extra time: seconds or 10m/2h")
@api_command
def lane_extend(api: ApiClient, lane_id: int, by: str) -> Any:
    """Move a live lane's expiry later (within its grant's longest duration)."""
    add = _duration_of(by, "--by")
    return api.call("POST", f"/lanes/{lane_id}/extend", json={"add_s": add}), show_record


@lane.command("release")
@click.argument("lane_id", type=int)
@api_command
def lane_release(api: ApiClient, lane_id: int) -> Any:
    """End your lane now (its flow rules are removed)."""
    return api.call("POST", f"/lanes/{lane_id}/release"), show_record


@lane.command("revoke")
@click.argument("lane_id", type=int)
@api_command
def lane_revoke(api: ApiClient, lane_id: int) -> Any:
    """(operators) end someone's lane."""
    return api.call("POST", f"/lanes/{lane_id}/revoke"), show_record


@lane.command("stats")
@click.argument("lane_id", type=int)
@api_command
def lane_stats(api: ApiClient, lane_id: int) -> Any:
    """Bytes and packets the lane carried, from the switches' counters."""
    return api.call("GET", f"/lanes/{lane_id}/stats"), show_record
