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
    "doctor": "viplanes.cli.doctor.command:doctor",
    "lab": "viplanes.cli.lab:lab",
    "pki": "viplanes.cli.pki:pki_group",
    "config": "viplanes.cli.config.command:config",
}
CONFIG_META = "viplanes.config_file"  # ctx.meta key of the LoadedConfig

# command name -> its one-line help, for the top-level --help: listing the commands must not
# import them (SQLAlchemy, networkx and os-ken cost 1.7-2.7 s on a [server] install).
# tests/unit/cli/test_lazy_help.py checks each line against the command's own docstring.
SUMMARIES: dict[str, str] = {
    "api": "The API alone, in N processes; lanes are installed by `viplanes controller cluster`.",
    "audit": "The decision log, newest first (operators).",
    "auto": "Automatic lanes for everyone: on, off (ends them all now), status (operators change).",
    "config": "The configuration file (/etc/viplanes/viplanes.toml, --config, $VIPLANES_CONFIG).",
    "controller": "The OpenFlow controller (os-ken 4.x, OpenFlow 1.3).",
    "db": "The database (SQLite file by default, PostgreSQL via VIPLANES_DB_URL).",
    "doctor": "Check the config file, database, PKI, topology, switches, their features and the clock; "
    "print what to fix.",
    "grant": "Grants: what a principal or a group may ask lanes for (operators create and revoke).",
    "lab": "The Mininet campus lab: placements x directions x paths x tools, and its report.",
    "lane": "VIP lanes: request one before a big transfer.",
    "login": "Sign in (OAuth device-code flow) at the campus provider; works over SSH.",
    "logout": "Forget the stored login (and revoke its refresh token at the provider).",
    "pki": "Campus CA and certificates for OpenFlow over TLS.",
    "principal": "Principals (people and scripts) and their tokens.",
    "serve": "Run the controller and the API in one process until SIGINT/SIGTERM.",
    "topology": "Campus topology files.",
    "transfer": "Run CMD on a VIP lane: request it, hold it while CMD runs, release it when CMD ends.",
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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from ``SUMMARIES`` (and the extras this install lacks), importing nothing."""
        from viplanes.cli.extras import extra_for, missing_module

        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            lacking = missing_module(name)
            text = SUMMARIES[name] if lacking is None else f"(needs viplanes[{extra_for(lacking)}], not installed here)"
            rows.append((name, click.Command(name, help=text).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Read the configuration file before any command module is imported (some read their
        env-var settings at import); its env-var settings last as long as the command."""
        from viplanes.cli.config.file import export_env, read, restore_env

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
    from viplanes.cli.config.options import command_defaults

    name = ctx.invoked_subcommand
    command = ctx.command.get_command(ctx, name) if name else None  # type: ignore[attr-defined]
    from viplanes.cli.extras import NeedsExtra

    if name and command is not None and not isinstance(command, NeedsExtra):
        ctx.default_map = {name: command_defaults(ctx.meta[CONFIG_META], name, command)}


if __name__ == "__main__":
    main()
