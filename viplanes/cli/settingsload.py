"""The process's settings for a command: parsed once per command from the environment (which
the configuration file has filled, viplanes/cli/config/file.py), a bad value one line and exit 78."""

from __future__ import annotations

from typing import Any

import click

from viplanes.cli.config.file import CONFIG_EXIT
from viplanes.settings import Settings

_META = "viplanes.settings"


class BadSetting(click.ClickException):
    """``error: settings: VIPLANES_X='...': expected ...``: the variable, the value and the form."""

    exit_code = CONFIG_EXIT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: settings: {self.message}", err=True)


def process_settings() -> Settings:
    """The command's one Settings (kept in the click context, so every part sees the same)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and _META in ctx.meta:
        settings: Settings = ctx.meta[_META]
        return settings
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        raise BadSetting(str(exc)) from None
    if ctx is not None:
        ctx.meta[_META] = settings
    return settings


def bad_setting(exc: ValueError) -> BadSetting:
    """A component's refusal of its settings (OIDC's, sFlow's prefixes) as the same one line."""
    return BadSetting(str(exc))
