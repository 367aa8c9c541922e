"""Option values shared by several commands, turned into click usage errors that name the option."""

from __future__ import annotations

import click

from viplanes.domain.hostport import parse_hostport


def hostport_option(value: str, option: str, default_port: int | None = None) -> tuple[str, int]:
    """:func:`parse_hostport` for a click option: bad input is a usage error naming the option."""
    try:
        return parse_hostport(value, default_port)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
