"""``--log-format`` and ``--log-level``: one definition for serve, api and the controller commands.

Under systemd the lines go to journald; ``json`` (or ``VIPLANES_LOG_FORMAT=json``) makes them one
JSON object per line for a log shipper (docs/deploy.md, "Logs")."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, TypeVar

import click

from viplanes.logs import LOG_FORMATS, LOG_LEVELS, setup_logging

F = TypeVar("F", bound=Callable[..., object])


def log_options(func: F) -> F:
    """Adds ``log_format`` and ``log_level`` parameters (flags, or VIPLANES_LOG_FORMAT/_LEVEL)."""
    func = click.option(
        "--log-level",
        "log_level",
        envvar="VIPLANES_LOG_LEVEL",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="INFO",
        show_default=True,
        help="least severe level logged (env VIPLANES_LOG_LEVEL)",
    )(func)
    func = click.option(
        "--log-format",
        "log_format",
        envvar="VIPLANES_LOG_FORMAT",
        type=click.Choice(LOG_FORMATS, case_sensitive=False),
        default="text",
        show_default=True,
        help="text, or json: one object per line with request_id, principal, lane_id (env VIPLANES_LOG_FORMAT)",
    )(func)
    return func


def configure(log_format: str, log_level: str, stream: IO[str] | None = None) -> None:
    """The root logger for this command, as the options asked."""
    setup_logging(log_format.lower(), log_level.upper(), stream)
