"""`viplanes doctor`'s configuration check: the file found, parsed, every key of every table
known (command options too, which a command alone checks only when it starts), and private
when it holds a secret.

Why here and not only at start: a misspelt `[serve]` key in /etc/viplanes/viplanes.toml is
otherwise found when the service restarts (at night, after an upgrade), and a file holding the
database password readable by a group is a leak that a start never reports.
"""

from __future__ import annotations

import grp
import stat
from collections.abc import Callable
from pathlib import Path

import click

from viplanes.cli.config.file import ConfigFileError, LoadedConfig, find_path, iter_values, read
from viplanes.cli.config.settings import holds_secret
from viplanes.cli.doctor.checks import FAIL, OK, WARN, Finding

SERVICE_GROUP = "viplanes"  # deploy/systemd/viplanes.sysusers.conf: the units' user and group


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def check_config(
    explicit: str | None,
    command_of: Callable[[str], click.Command | None],
    group_name: Callable[[int], str] = _group_name,
) -> list[Finding]:
    """Findings for the file ``--config`` (or $VIPLANES_CONFIG, or the default path) names.

    ``command_of`` gives the top-level command of a table (None: not a command), so each
    command table is checked against that command's options as the command itself would."""
    path, required = find_path(explicit)
    if path is None or (not required and not path.exists()):
        return [Finding("config", OK, f"no file at {path}: flags and environment only")]
    try:
        loaded = read(explicit)
    except ConfigFileError as exc:
        return [Finding("config", FAIL, exc.message, "fix the key named; viplanes config show checks it again")]
    if loaded.path is None:
        return [Finding("config", WARN, f"{path}: not readable by this user", "run doctor as the service's user")]
    found = [_keys(loaded, command_of), _mode(loaded, loaded.path, group_name)]
    return found


def _keys(loaded: LoadedConfig, command_of: Callable[[str], click.Command | None]) -> Finding:
    from viplanes.cli.config.options import command_defaults
    from viplanes.cli.extras import NeedsExtra

    unchecked = []
    for table in loaded.tables:
        command = command_of(table)
        if command is None:
            continue  # a shared table ([database], [client] ...): read() checked it
        if isinstance(command, NeedsExtra):
            unchecked.append(table)
            continue
        try:
            command_defaults(loaded, table, command)
        except ConfigFileError as exc:
            return Finding("config.keys", FAIL, exc.message, f"viplanes config keys {table} lists the known keys")
    if unchecked:
        return Finding(
            "config.keys",
            WARN,
            f"{loaded.path}: [{'], ['.join(unchecked)}] not checked: their commands are not installed here",
            "install the extra they need (viplanes --help names it)",
        )
    return Finding("config.keys", OK, f"{loaded.path}: {len(loaded.tables)} tables, every key known")


def _mode(loaded: LoadedConfig, path: Path, group_name: Callable[[int], str]) -> Finding:
    """A file with a secret: 0600, or 0640 with the service's own group (so the units read it)."""
    st = path.stat()
    mode = stat.S_IMODE(st.st_mode)
    secrets = [f"[{t}] {k}" for t, k, v, secret in iter_values(loaded) if holds_secret(v, secret)]
    if not secrets:
        return Finding("config.permissions", OK, f"{path}: mode {mode:o}, no secrets in it")
    group = group_name(st.st_gid)
    private = mode & 0o077 == 0 or (mode & 0o077 == 0o040 and group == SERVICE_GROUP)
    if private:
        return Finding("config.permissions", OK, f"{path}: mode {mode:o} (group {group}), holds {len(secrets)} secrets")
    return Finding(
        "config.permissions",
        FAIL,
        f"{path}: holds {', '.join(secrets)} and is mode {mode:o} (group {group})",
        f"chmod 600 {path} (or 640 with group {SERVICE_GROUP})",
    )
