"""The command tables of the configuration file: click options turned into keys and back.

A key is the option's long name (``--max-clock-skew`` -> ``max_clock_skew``); its value is checked
with the option's own click type, after a strict TOML type check (``threads = "8"`` is refused:
a quoted number in a service file is a mistake more often than a wish).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click

from viplanes.cli.config.file import ConfigFileError, LoadedConfig, expected

SKIP = {"help", "version", "config"}


def option_key(param: click.Option) -> str:
    longs = [o for o in param.opts if o.startswith("--")]
    return (longs[0] if longs else param.opts[0]).lstrip("-").replace("-", "_")


def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Option]]:
    """(subcommand path below the top-level command, option) of every configurable option."""
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name))
        return
    for param in cmd.params:
        if isinstance(param, click.Option) and param.name not in SKIP and not param.hidden:
            yield path, param


def keys_of(cmd: click.Command) -> dict[str, list[tuple[tuple[str, ...], click.Option]]]:
    out: dict[str, list[tuple[tuple[str, ...], click.Option]]] = {}
    for path, param in walk(cmd):
        out.setdefault(option_key(param), []).append((path, param))
    return out


def _strict_kind(param: click.Option) -> type:
    if param.is_flag or isinstance(param.type, click.types.BoolParamType):
        return bool
    if isinstance(param.type, click.types.IntParamType):
        return int
    if isinstance(param.type, click.types.FloatParamType):
        return float
    return str


def check_value(where: str, param: click.Option, value: Any, element: bool = False) -> Any:
    """The value as the option would take it, or ConfigFileError naming the key."""
    if not element and (param.multiple or param.nargs != 1):
        if not isinstance(value, list):
            raise ConfigFileError(f"{where}: {expected(list, value)}")
        return [check_value(where, param, v, element=True) for v in value]
    kind = _strict_kind(param)
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigFileError(f"{where}: {expected(kind, value)}")
    if kind is bool:
        return value
    try:
        return param.type.convert(value, param, None)
    except click.BadParameter as exc:
        raise ConfigFileError(f"{where}: {exc.message}") from None


def command_defaults(loaded: LoadedConfig, name: str, cmd: click.Command) -> dict[str, Any]:
    """The ``default_map`` of one top-level command from its table (nested for a group)."""
    table = loaded.tables.get(name, {})
    if not table:
        return {}
    from viplanes.cli.config.settings import ENV_SETTINGS

    shared = {s.key for s in ENV_SETTINGS if s.table == name}
    known = keys_of(cmd)
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in shared:
            continue
        where = loaded.where(name, key)
        if key not in known:
            raise ConfigFileError(f"{where}: unknown key (`viplanes config keys {name}` lists them)")
        for path, param in known[key]:
            node = out
            for part in path:
                node = node.setdefault(part, {})
            assert param.name is not None
            node[param.name] = check_value(where, param, value)
    return out
