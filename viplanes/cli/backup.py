"""`viplanes db backup FILE` and `viplanes db restore FILE` (``viplanes.store.backup`` does the work).

Exit codes: 0 done; 1 the database failed; 4 the restore was refused (lanes present without
--force, a schema newer than this code); 5 the backup itself failed (file, pg_dump/pg_restore).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_DATABASE, EXIT_REFUSED, EXIT_BACKUP = 1, 4, 5

_db_option = click.option(
    "--db", "db_url", envvar="VIPLANES_DB_URL", default=None, help="database URL (default ./viplanes.db)"
)


def _fail(code: int, message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.command("backup")
@_db_option
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def backup_cmd(db_url: str | None, file: Path) -> None:
    """Write a consistent backup of the database to FILE (mode 0600); safe while serve runs."""
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.store.backup import BackupError, backup
    from viplanes.store.db import Database

    d = None
    try:
        d = Database(db_url)
        click.echo(backup(d, file).line())
    except BackupError as exc:
        _fail(EXIT_BACKUP, str(exc))
    except SQLAlchemyError as exc:
        _fail(EXIT_DATABASE, f"database: {str(exc).splitlines()[0]}")
    finally:
        if d is not None:
            d.dispose()


def after_restore(revision: str | None, head: str) -> str:
    """What the operator does next: nothing for a backup at head (the message once said to
    upgrade it anyway), `db upgrade` for an older one."""
    if revision == head:
        return f"already at this code's schema head ({head}): nothing to upgrade"
    return f"schema {revision or 'none'} is behind this code's {head}: `viplanes db upgrade` (or the next start) brings it to head"


@click.command("restore")
@_db_option
@click.option("--force", is_flag=True, help="replace a database that already holds lanes")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def restore_cmd(db_url: str | None, force: bool, file: Path) -> None:
    """Replace the database's contents by the backup FILE (stop serve/api first)."""
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.store.backup import BackupError, RestoreRefused, max_revision, restore
    from viplanes.store.db import Database

    d = None
    try:
        d = Database(db_url)
        done = restore(d, file, force=force)
        click.echo(f"restored {done.line()} into {d.display_url}; {after_restore(done.revision, max_revision())}")
    except RestoreRefused as exc:
        _fail(EXIT_REFUSED, f"refused: {exc}")
    except BackupError as exc:
        _fail(EXIT_BACKUP, str(exc))
    except SQLAlchemyError as exc:
        _fail(EXIT_DATABASE, f"database: {str(exc).splitlines()[0]}")
    finally:
        if d is not None:
            d.dispose()
