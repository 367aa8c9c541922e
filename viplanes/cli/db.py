"""`viplanes db`: schema migrations of the store."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from viplanes.store.db import Database


@click.group()
def db() -> None:
    """The database (SQLite file by default, PostgreSQL via VIPLANES_DB_URL)."""


def _database(url: str | None) -> Database:
    from viplanes.store.db import Database

    return Database(url)


@db.command("upgrade")
@click.option("--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default ./viplanes.db)")
@click.option("--revision", default="head")
def upgrade(db_url: str | None, revision: str) -> None:
    """Create or migrate the schema (idempotent)."""

    from viplanes.store.migrations import current
    from viplanes.store.migrations import upgrade as run

    try:
        d = _database(db_url)
        run(d.engine, revision)
        click.echo(f"{d.display_url}: schema at {current(d.engine)}")
        d.dispose()
    except Exception as exc:  # SQLAlchemy, and alembic's plain exceptions for bad revisions
        click.echo(f"error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", err=True)
        sys.exit(1)


@db.command("current")
@click.option("--db", "db_url", envvar="VIPLANES_DB_URL", default=None)
def show_current(db_url: str | None) -> None:
    """Print the schema revision (empty when the database was never migrated)."""
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.store.migrations import current

    try:
        d = _database(db_url)
        click.echo(current(d.engine) or "none")
        d.dispose()
    except SQLAlchemyError as exc:
        click.echo(f"error: {exc.__class__.__name__}: {str(exc).splitlines()[0]}", err=True)
        sys.exit(1)


EXIT_DATABASE, EXIT_EXPORT = 1, 3


@db.command("prune")
@click.option("--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default ./viplanes.db)")
@click.option(
    "--export",
    "export_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="directory for the JSON-lines export (made 0700; files 0600), written before any delete",
)
@click.option(
    "--lanes-days",
    type=float,
    default=None,
    help="delete ended lanes older than this (0: keep; default $VIPLANES_LANE_RETENTION_DAYS or 90)",
)
@click.option(
    "--audit-days",
    type=float,
    default=None,
    help="delete audit events older than this (0: keep; default $VIPLANES_AUDIT_RETENTION_DAYS or 365)",
)
def prune_cmd(db_url: str | None, export_dir: str, lanes_days: float | None, audit_days: float | None) -> None:
    """Export, then delete, ended lanes and audit events past their retention (audited)."""
    import time
    from dataclasses import replace

    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.store.retention import RetentionConfig, RetentionError, prune

    config = replace(RetentionConfig(), export_dir=export_dir)
    if lanes_days is not None:
        config = replace(config, lane_days=lanes_days)
    if audit_days is not None:
        config = replace(config, audit_days=audit_days)
    try:
        config.check()
    except RetentionError as exc:
        raise click.BadParameter(str(exc)) from None
    d = None
    try:
        d = _database(db_url)
        click.echo(prune(d, config, time.time(), actor="cli").line())
    except RetentionError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_EXPORT)
    except OSError as exc:
        click.echo(
            f"error: export: {exc.strerror or exc} ({exc.filename or export_dir}); unexported rows kept", err=True
        )
        sys.exit(EXIT_EXPORT)
    except SQLAlchemyError as exc:
        click.echo(f"error: database: {str(exc).splitlines()[0]}", err=True)
        sys.exit(EXIT_DATABASE)
    finally:
        if d is not None:
            d.dispose()


from viplanes.cli.backup import backup_cmd, restore_cmd  # noqa: E402  (its own module: issue 29)

db.add_command(backup_cmd)
db.add_command(restore_cmd)
