"""`viplanes` command line. Each component owns its command group; this module only wires them.

Groups load lazily so `viplanes topology check` does not import Flask or os-ken.
"""

from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "topology": "viplanes.cli.topology:topology",
    "controller": "viplanes.cli.controller:controller",
    "api": "viplanes.cli.api:api",
    "serve": "viplanes.cli.serve:serve",
    "principal": "viplanes.cli.client:principal",
    "grant": "viplanes.cli.client:grant",
    "lane": "viplanes.cli.lanecmd:lane",
    "audit": "viplanes.cli.client:audit",
    "transfer": "viplanes.cli.transfer:transfer",
    "db": "viplanes.cli.db:db",
    "lab": "viplanes.cli.lab:lab",
    "pki": "viplanes.cli.pki:pki_group",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                return None  # component not built yet
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup)
@click.version_option(package_name="viplanes")
def main() -> None:
    """VIP Lanes: pre-authorized big-data flows that bypass campus middleboxes."""


if __name__ == "__main__":
    main()
