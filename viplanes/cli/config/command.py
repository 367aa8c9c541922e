"""``viplanes config show|check|keys``: what the service will run with, and where each value
came from, before it runs (secrets masked, so the output can go into a ticket)."""

from __future__ import annotations

from typing import Any

import click

from viplanes.cli.config.file import LoadedConfig
from viplanes.cli.config.options import command_defaults, keys_of
from viplanes.cli.config.settings import ENV_SETTINGS, is_secret_name, mask
from viplanes.cli.settingsload import process_settings
from viplanes.settings.environ import environment_value

SERVICE_COMMANDS = ("serve", "api", "controller")  # shown in full by `config show`


def _loaded(ctx: click.Context) -> LoadedConfig:
    from viplanes.cli.main import CONFIG_META

    return ctx.find_root().meta[CONFIG_META]


def command_named(name: str) -> click.Command:
    from viplanes.cli.main import main

    ctx = click.Context(main)
    cmd = main.get_command(ctx, name)
    if cmd is None:
        raise click.BadParameter(f"no command {name!r}", param_hint="TABLE")
    return cmd


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shared_lines(loaded: LoadedConfig) -> list[tuple[str, str, str, str]]:
    """The ``VIPLANES_*`` settings as the process parsed them (the one Settings serve and doctor use)."""
    settings = process_settings()
    rows = []
    for s in ENV_SETTINGS:
        in_file = s.key in loaded.tables.get(s.table, {})
        if s.env in settings.given and s.env not in loaded.exported:
            source = f"env {s.env}" + (" (overrides the file)" if in_file else "")
            parsed = settings.raw(s.env)  # the typed value serve and doctor use
            value: str = _toml(mask(parsed, True) if s.secret else parsed)
        elif in_file:
            raw = loaded.tables[s.table][s.key]
            source, value = f"file {loaded.path}", _toml(mask(raw, True) if s.secret else raw)
        else:
            source, value = "default", s.default or "(none)"
        rows.append((s.table, s.key, value, source))
    return rows


def _command_lines(loaded: LoadedConfig, name: str) -> list[tuple[str, str, str, str]]:
    cmd = command_named(name)
    in_file = loaded.tables.get(name, {})
    command_defaults(loaded, name, cmd)  # the table checked with the options' own types
    rows = []
    for key, places in sorted(keys_of(cmd).items()):
        param = places[0][1]
        secret = is_secret_name(key) or is_secret_name(param.name or "")
        envvar = param.envvar if isinstance(param.envvar, str) else None
        if envvar and environment_value(envvar):
            exported = envvar in loaded.exported
            source = f"file {loaded.path} (as {envvar})" if exported else f"env {envvar}"
            value = _toml(mask(environment_value(envvar), secret))
            if key in in_file and not exported:
                source += " (overrides the file)"
        elif key in in_file:
            source, value = f"file {loaded.path}", _toml(mask(in_file[key], secret) if secret else in_file[key])
        else:
            default = param.default
            source = "default"
            plain = isinstance(default, (str, int, float, bool, list, tuple)) and default != ()
            value = _toml(default) if plain else "(none)"
        rows.append((name, key, value, source))
    return rows


@click.group()
def config() -> None:
    """The configuration file (/etc/viplanes/viplanes.toml, --config, $VIPLANES_CONFIG)."""


@config.command("show")
@click.option("--all", "show_all", is_flag=True, help="every command's keys, not only the services'")
@click.pass_context
def show(ctx: click.Context, show_all: bool) -> None:
    """Print the effective settings (file, env, defaults) and where each came from; secrets masked."""
    from viplanes.cli.main import COMMANDS

    loaded = _loaded(ctx)
    process_settings()  # a bad value: its one line (exit 78) before anything is printed
    click.echo(f"# file: {loaded.path or 'none'}")
    names = sorted(COMMANDS) if show_all else sorted(set(SERVICE_COMMANDS) | (set(loaded.tables) & set(COMMANDS)))
    rows = _shared_lines(loaded)
    for name in names:
        rows += _command_lines(loaded, name)
    by_table: dict[str, list[str]] = {}
    for tname, key, value, source in rows:
        by_table.setdefault(tname, []).append(f"{key} = {value}  # {source}")
    for tname, lines in by_table.items():
        click.echo(f"\n[{tname}]")
        click.echo("\n".join(lines))


@config.command("check")
@click.pass_context
def check(ctx: click.Context) -> None:
    """Check every table of the file against the commands' options (exit 78 naming the key)."""
    from viplanes.cli.main import COMMANDS

    loaded = _loaded(ctx)
    for name in sorted(set(loaded.tables) & set(COMMANDS)):
        command_defaults(loaded, name, command_named(name))
    click.echo(f"{loaded.path or 'no configuration file'}: ok")


@config.command("keys")
@click.argument("table")
def keys(table: str) -> None:
    """List the keys of one table with their help."""
    for s in ENV_SETTINGS:
        if s.table == table:
            click.echo(f"{s.key}  {s.help} (env {s.env})")
    if table not in {s.table for s in ENV_SETTINGS} - {"db", "pki", "lab"}:
        _keys_of_command(table)


def _keys_of_command(table: str) -> None:
    for key, places in sorted(keys_of(command_named(table)).items()):
        click.echo(f"{key}  {places[0][1].help or ''}")
