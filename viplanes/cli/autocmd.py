"""`viplanes auto on|off|status` and `viplanes grant update`: automatic lanes (issue 32).

`auto off` takes effect at once: no new automatic lane, and every live one is revoked.
"""

from __future__ import annotations

from typing import Any

import click

from viplanes.cli.autoopts import auto_options, split_auto
from viplanes.cli.client import api_command, fail, grant, show_record
from viplanes.client.http import ApiClient


@click.group()
def auto() -> None:
    """Automatic lanes for everyone: on, off (ends them all now), status (operators change)."""


def _switch_line(d: dict[str, Any]) -> None:
    ended = d.get("ended_lanes")
    more = f"; ended lanes: {', '.join(map(str, ended)) or 'none'}" if ended is not None else ""
    click.echo(f"automatic lanes {'on' if d['enabled'] else 'off'}; live: {d['live_auto_lanes']}{more}")


@auto.command("on")
@api_command
def auto_on(api: ApiClient) -> Any:
    """Allow automatic lanes again (each grant still has to allow them)."""
    return api.call("PUT", "/automation", json={"enabled": True}), _switch_line


@auto.command("off")
@api_command
def auto_off(api: ApiClient) -> Any:
    """Stop automatic lanes now: none starts, every live one is revoked."""
    return api.call("PUT", "/automation", json={"enabled": False}), _switch_line


@auto.command("status")
@api_command
def auto_status(api: ApiClient) -> Any:
    """Is automation on, and how many automatic lanes are live."""
    return api.call("GET", "/automation"), _switch_line


@grant.command("update")
@click.argument("grant_id", type=int)
@auto_options
@api_command
def grant_update(api: ApiClient, grant_id: int, **body: Any) -> Any:
    """Change a grant's automatic-lane policy (operators); options not given keep their value.

    Example: grant update 3 --auto --auto-rate 100 --auto-idle 20 --auto-max 2 --auto-fireflies
    """
    given = split_auto(body)
    if not given:
        fail("nothing to change: give --auto/--no-auto or an --auto-* option", 2)
    current = api.call("GET", f"/grants/{grant_id}/auto")
    policy = {k: v for k, v in current.items() if k not in ("grant_id", "ended_lanes")}
    return api.call("PUT", f"/grants/{grant_id}/auto", json={**policy, **given}), show_record
