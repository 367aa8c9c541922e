"""Which optional part of the install (the wheel's extras) a command needs, and the one line
that says so when it is missing.

Why: `pip install viplanes` (the client: click, rich, requests) must give a researcher the API
commands and `viplanes transfer` without os-ken, Flask or psycopg2; a server command run there
must not die with a traceback but name the extra to install.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import NoReturn

import click

NEEDS_EXTRA_EXIT = 69  # sysexits EX_UNAVAILABLE: this install lacks a part; distinct from 1-5, 76, 78

# top-level modules only the [lab] extra (or the Debian packages it expects) brings
LAB_MODULES = frozenset({"matplotlib", "mininet"})


# command -> the modules it needs beyond the client's (the first of each extra is enough to tell);
# a command not named here is a client command (principal, grant, lane, audit, transfer, config)
SERVER_PROBE = ("os_ken", "flask", "sqlalchemy", "yaml", "cryptography")
COMMAND_NEEDS: dict[str, tuple[str, ...]] = {
    "serve": SERVER_PROBE,
    "api": SERVER_PROBE,
    "controller": SERVER_PROBE,
    "db": SERVER_PROBE,
    "doctor": SERVER_PROBE,
    "topology": SERVER_PROBE,
    "pki": SERVER_PROBE,
    "lab": (*SERVER_PROBE, "matplotlib"),
}


def missing_module(command: str) -> str | None:
    """The first module ``command`` needs that this install lacks (None: it has them all)."""
    for module in COMMAND_NEEDS.get(command, ()):
        if importlib.util.find_spec(module) is None:
            return module
    return None


def extra_for(missing_module: str) -> str:
    """The extra that brings a missing top-level module: ``lab`` for the lab's, else ``server``."""
    return "lab" if missing_module.split(".")[0] in LAB_MODULES else "server"


def require(command: str, *modules: str) -> None:
    """For a client command with one server-side subcommand (`principal add` writes the database
    directly): the needs-extra line and exit 69 when a module is missing."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            click.echo(needs_line(command, module), err=True)
            sys.exit(NEEDS_EXTRA_EXIT)


def needs_line(command: str, missing_module: str) -> str:
    extra = extra_for(missing_module)
    return (
        f"error: viplanes {command}: this command needs viplanes[{extra}] (no module {missing_module.split('.')[0]}): "
        f"pip install 'viplanes[{extra}]'"
    )


class NeedsExtra(click.Command):
    """The stand-in's own type, so the config file's [command] table is not checked against it."""


def needs_extra_command(name: str, missing_module: str) -> NeedsExtra:
    """A stand-in for a command whose module cannot be imported here: listed by --help with the
    extra it needs, and, run (with any arguments, --help too), one line and exit 69."""

    def run() -> NoReturn:
        click.echo(needs_line(name, missing_module), err=True)
        sys.exit(NEEDS_EXTRA_EXIT)

    return NeedsExtra(
        name,
        callback=run,
        help=f"(needs viplanes[{extra_for(missing_module)}], not installed here)",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
