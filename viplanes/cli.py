"""`viplanes` command line. Each component owns its command group; this module only wires them.

Groups load lazily so `viplanes topology check` does not import Flask or os-ken.
"""
from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "topology": "viplanes.topologies.cli:topology",
    "controller": "viplanes.node:controller",  # run (controller/cli.py) + cluster (node.py)
    "api": "viplanes.api_node:api",
    "serve": "viplanes.serve:serve",
    "principal": "viplanes.client_cli:principal",
    "grant": "viplanes.client_cli:grant",
    "lane": "viplanes.client_cli:lane",
    "audit": "viplanes.client_cli:audit",
    "transfer": "viplanes.transfer:transfer",
    "db": "viplanes.store_cli:db",
    "lab": "viplanes.lab.cli:lab",
    "pki": "viplanes.pki_cli:pki_group",
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
