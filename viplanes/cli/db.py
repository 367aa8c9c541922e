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
