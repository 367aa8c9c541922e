"""``/etc/viplanes/viplanes.toml``: one file for every command, checked before anything runs.

Why click's ``default_map`` rather than a settings object per command: each command's options
stay the single source of truth (name, type, range, default); the file only changes defaults, so
a flag and an env var still override it, and a new option is a new key without any code here.
Keys are an option's long name without ``--`` and with ``_`` for ``-``, in the table of its
top-level command (``[serve] api = "0.0.0.0:8443"``); a group's table covers every subcommand that
has the option. Settings that are environment variables (settings.ENV_SETTINGS) are
exported when the environment lacks them. Any error is one line naming the key, exit CONFIG_EXIT.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from viplanes.cli.config.settings import CONFIG_ENV, ENV_SETTINGS, EnvSetting, holds_secret, is_secret_name
from viplanes.settings import SettingError

DEFAULT_PATH = Path("/etc/viplanes/viplanes.toml")
CONFIG_EXIT = 78  # sysexits EX_CONFIG: the configuration is wrong or unsafe; distinct from 1 and 2


class ConfigFileError(click.ClickException):
    """One line naming the file and the key; its own exit code for supervisors."""

    exit_code = CONFIG_EXIT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


@dataclass
class LoadedConfig:
    """The file as read: its path (None: no file), its tables, and which env vars it exported."""

    path: Path | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    exported: dict[str, str] = field(default_factory=dict)

    def where(self, table: str, key: str) -> str:
        return f"{self.path}: [{table}] {key}"


def find_path(explicit: str | None) -> tuple[Path | None, bool]:
    """(path, required): --config must exist; $VIPLANES_CONFIG and the default may be absent."""
    if explicit:
        return Path(explicit), True
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env), False
    return DEFAULT_PATH, False


def read(explicit: str | None = None) -> LoadedConfig:
    """Parse and check the shared tables; command tables are checked by ``command_defaults``."""
    path, required = find_path(explicit)
    if path is None:
        return LoadedConfig()
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except FileNotFoundError:
        if required:
            raise ConfigFileError(f"{path}: no such file") from None
        return LoadedConfig()
    except PermissionError:
        if required or path != DEFAULT_PATH:
            raise ConfigFileError(f"{path}: permission denied") from None
        return LoadedConfig()  # the service's file, not for every user of the CLI
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not TOML: {exc}") from None
    tables: dict[str, dict[str, Any]] = {}
    for name, value in data.items():
        if isinstance(value, dict):
            tables[name] = value
        elif not any(isinstance(v, dict) for v in data.values()):
            continue  # a flat file is the per-user client file (api_url, token), ClientConfig's own
        else:
            raise ConfigFileError(f"{path}: {name}: unknown key (settings go in tables such as [serve])")
    loaded = LoadedConfig(path=path, tables=tables)
    _check_shared(loaded)
    _refuse_readable_secrets(loaded, mode)
    return loaded


def _env_settings(table: str) -> dict[str, EnvSetting]:
    return {s.key: s for s in ENV_SETTINGS if s.table == table}


def _check_shared(loaded: LoadedConfig) -> None:
    from viplanes.cli.main import COMMANDS

    for table, values in loaded.tables.items():
        shared = _env_settings(table)
        if not shared and table not in COMMANDS and table != "config":
            known = sorted({s.table for s in ENV_SETTINGS} | set(COMMANDS))
            raise ConfigFileError(f"{loaded.path}: [{table}]: unknown table (known: {', '.join(known)})")
        for key, value in values.items():
            setting = shared.get(key)
            if setting is None:
                if table not in COMMANDS:
                    raise ConfigFileError(f"{loaded.where(table, key)}: unknown key")
                continue  # an option of the command: checked when that command runs
            if not _fits(setting.kind, value):
                raise ConfigFileError(f"{loaded.where(table, key)}: {expected(setting.kind, value)}")
            try:  # the same bounds as the environment's value (viplanes/settings/table.py)
                setting.parse(str(value))
            except SettingError:
                raise ConfigFileError(
                    f"{loaded.where(table, key)}: expected {setting.accepted()}, got {value}"
                ) from None


def _fits(kind: type, value: Any) -> bool:
    """A TOML value of the setting's type (a flag may also be written 0 or 1)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is bool:
        return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))
    if kind is float:
        return is_number
    return isinstance(value, kind) and not isinstance(value, bool)


def _refuse_readable_secrets(loaded: LoadedConfig, mode: int) -> None:
    """A token or a database password in a file every local user can read is refused, not warned:
    a warning in a service's journal is read after the secret was."""
    if not mode & stat.S_IROTH:
        return
    for table, key, value, secret in iter_values(loaded):
        if holds_secret(value, secret):
            raise ConfigFileError(
                f"{loaded.where(table, key)}: a secret in a file every user can read "
                f"(mode {stat.S_IMODE(mode):o}); chmod o-r {loaded.path}"
            )


def iter_values(loaded: LoadedConfig) -> Iterator[tuple[str, str, Any, bool]]:
    """(table, key, value, secret) of every key in the file."""
    for table, values in loaded.tables.items():
        shared = _env_settings(table)
        for key, value in values.items():
            setting = shared.get(key)
            yield table, key, value, setting.secret if setting else is_secret_name(key)


def export_env(loaded: LoadedConfig) -> dict[str, str | None]:
    """Set the env-var settings the environment lacks; returns what to restore afterwards."""
    before: dict[str, str | None] = {}
    for setting in ENV_SETTINGS:
        value = loaded.tables.get(setting.table, {}).get(setting.key)
        if value is None or os.environ.get(setting.env):
            continue
        before[setting.env] = os.environ.get(setting.env)
        os.environ[setting.env] = str(value)
        loaded.exported[setting.env] = str(value)
    return before


def restore_env(before: dict[str, str | None]) -> None:
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def expected(kind: Any, value: Any) -> str:
    words = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list"}
    return f"expected {words.get(kind, kind.__name__)}, got {_show(value)}"


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
