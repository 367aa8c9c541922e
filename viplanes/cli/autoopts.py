"""The automation options of `grant create` and `grant update` (issue 32), and the body they make."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

POLICY_KEYS = (
    "enabled",
    "min_rate_mbps",
    "window_s",
    "min_bytes",
    "idle_s",
    "max_auto_lanes",
    "fireflies",
    "max_duration_s",
)


def auto_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--auto and its knobs; every one defaults to "not given" (None) so update changes only those."""
    opts = [
        click.option("--auto/--no-auto", "auto_enabled", default=None, help="allow automatic lanes (off by default)"),
        click.option(
            "--auto-rate", "auto_min_rate_mbps", type=click.FloatRange(0, min_open=True), help="Mbit/s threshold"
        ),
        click.option("--auto-window", "auto_window_s", type=click.FloatRange(0.1, 3600), help="threshold window, s"),
        click.option("--auto-bytes", "auto_min_bytes", type=click.IntRange(1), help="bytes within the window"),
        click.option("--auto-idle", "auto_idle_s", type=click.IntRange(1, 86400), help="end after S idle seconds"),
        click.option("--auto-max", "auto_max_auto_lanes", type=click.IntRange(1, 1000), help="automatic lanes at once"),
        click.option(
            "--auto-fireflies/--no-auto-fireflies", "auto_fireflies", default=None, help="scitags marks suffice"
        ),
        click.option(
            "--auto-max-duration", "auto_max_duration_s", type=click.IntRange(10), help="automatic lane length"
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def split_auto(body: dict[str, Any]) -> dict[str, Any]:
    """Pop the automation options out of a command's keyword arguments: those given."""
    # the options' names carry an auto_ prefix: the grant's own --max-duration is max_duration_s
    given = {k: body.pop(f"auto_{k}") for k in POLICY_KEYS if f"auto_{k}" in body}
    return {k: v for k, v in given.items() if v is not None}
