"""`viplanes` command line. Each component owns its command group; this module only wires them.

Groups load lazily so `viplanes topology check` does not import Flask or os-ken.
"""

from __future__ import annotations

import importlib

import click

from viplanes import __version__

# command name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "topology": "viplanes.cli.topology:topology",
    "controller": "viplanes.cli.controller:controller",
    "api": "viplanes.cli.api:api",
    "serve": "viplanes.cli.serve:serve",
    "principal": "viplanes.cli.client:principal",
    "grant": "viplanes.cli.autocmd:grant",  # the client's group plus `grant update`
    "auto": "viplanes.cli.autocmd:auto",
    "lane": "viplanes.cli.lanecmd:lane",
    "audit": "viplanes.cli.client:audit",
    "transfer": "viplanes.cli.transfer:transfer",
    "login": "viplanes.cli.login:login",
    "logout": "viplanes.cli.login:logout",
    "db": "viplanes.cli.db:db",
    "doctor": "viplanes.cli.doctor:doctor",
    "lab": "viplanes.cli.lab:lab",
    "pki": "viplanes.cli.pki:pki_group",
    "config": "viplanes.cli.configcmd:config",
}
CONFIG_META = "viplanes.config_file"  # ctx.meta key of the LoadedConfig


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        from viplanes.cli.extras import missing_module, needs_extra_command

        lacking = missing_module(name)
        if lacking is not None:
            return needs_extra_command(name, lacking)  # a client-only install (viplanes[client])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                return None  # component not built yet
            if exc.name and not exc.name.startswith("viplanes"):
                return needs_extra_command(name, exc.name)  # a dependency COMMAND_NEEDS does not name
            raise
        return getattr(module, attr)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Read the configuration file before any command module is imported (some read their
        env-var settings at import); its env-var settings last as long as the command."""
        from viplanes.cli.configfile import export_env, read, restore_env

        rest = super().parse_args(ctx, args)
        loaded = read(ctx.params.get("config_path"))
        ctx.meta[CONFIG_META] = loaded
        before = export_env(loaded)
        ctx.call_on_close(lambda: restore_env(before))
        return rest


@click.group(cls=LazyGroup)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="configuration file [default: $VIPLANES_CONFIG, else /etc/viplanes/viplanes.toml if present]",
)
@click.version_option(version=__version__, prog_name="viplanes")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """VIP Lanes: pre-authorized big-data flows that bypass campus middleboxes."""
    from viplanes.cli.configoptions import command_defaults

    name = ctx.invoked_subcommand
    command = ctx.command.get_command(ctx, name) if name else None  # type: ignore[attr-defined]
    from viplanes.cli.extras import NeedsExtra

    if name and command is not None and not isinstance(command, NeedsExtra):
        ctx.default_map = {name: command_defaults(ctx.meta[CONFIG_META], name, command)}


if __name__ == "__main__":
    main()
