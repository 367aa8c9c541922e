"""Backups of the store: one file, readable by its owner only, taken while ``serve`` runs.

SQLite: the online backup API (``sqlite3.Connection.backup``) copies the database page by page
under SQLite's own locks, so the copy is one consistent snapshot even while lanes are written;
the copy is switched out of WAL mode so it is a single self-contained file. PostgreSQL:
``pg_dump --format=custom`` (one transaction-consistent snapshot) and ``pg_restore``.

A restore refuses three things an operator does not mean to do: overwrite a database that holds
lanes (``force`` says they mean it), load a backup made by newer code than this one (its
schema revision is unknown to our migrations: the tables would not match the code, and the next
start could not migrate them), and load schema objects our migrations do not make (a trigger, a
view, a table: ``backupcheck``), or a SQLite file that fails its integrity check. A backup is
written to a random name made exclusively beside the target, then renamed: a file planted under
a predictable name never becomes the backup, and a directory others may write to is refused. The PostgreSQL password never reaches a command line (``ps``
shows every argument to every user): it goes to pg_dump/pg_restore in ``PGPASSWORD``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import inspect, text

from viplanes.privatefile import private_temp
from viplanes.settings.environ import child_environment
from viplanes.store.backupcheck import operators_in, pg_problems, sqlite_problems
from viplanes.store.db import Database
from viplanes.store.filemode import create_private
from viplanes.store.pgconnect import libpq_url

PG_BIN = Path("/usr/lib/postgresql/15/bin")  # Debian 12's PostgreSQL; else whatever is on PATH
SQLITE_MAGIC = b"SQLite format 3\x00"
PGDUMP_MAGIC = b"PGDMP"
TOOL_TIMEOUT_S = 3600.0


class BackupError(Exception):
    """The backup or restore could not be done; the message says why and what to do."""


class RestoreRefused(BackupError):
    """The restore would do harm (lanes overwritten, a schema newer than the code)."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    revision: str | None
    size: int
    operators: tuple[str, ...] | None = None  # after a SQLite restore: the operators it brought

    def line(self) -> str:
        ops = "" if self.operators is None else f", operators: {', '.join(self.operators) or 'none'}"
        return f"{self.path}: {self.size} bytes, schema {self.revision or 'none'}{ops}"


def known_revisions() -> set[str]:
    """Every schema revision this code's migrations know."""
    from alembic.script import ScriptDirectory

    from viplanes.store.migrations import alembic_config

    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def max_revision() -> str:
    """This code's head (revisions are numbered ``NNNN_...``, so the largest is the newest)."""
    return max(known_revisions())


def backup(database: Database, dest: Path) -> BackupResult:
    """Write a backup of ``database`` to ``dest`` (created 0600, replaced atomically)."""
    dest = Path(dest)
    if database.is_sqlite and _same_file(dest, _sqlite_path(database)):
        # replaced under a running serve, its writes would go on into the unlinked old file
        raise BackupError(f"{dest} is the database itself; write the backup elsewhere")
    try:
        fd, tmp = private_temp(dest)  # never a predictable name another user could plant first
    except PermissionError as exc:
        raise BackupError(str(exc)) from None
    except OSError as exc:
        raise BackupError(f"{exc.filename or dest}: {exc.strerror or exc}") from None
    try:
        if database.is_sqlite:
            os.close(fd)
            _sqlite_backup(_sqlite_path(database), tmp)
        else:
            _pg_dump(database.url, fd)
        os.replace(tmp, dest)
    except OSError as exc:
        raise BackupError(f"{exc.filename or dest}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return BackupResult(dest, backup_revision(dest), dest.stat().st_size)


def restore(database: Database, src: Path, force: bool = False) -> BackupResult:
    """Replace the contents of ``database`` by the backup ``src``; see the module docstring."""
    src = Path(src)
    kind = _kind(src)
    if (kind == "sqlite") != database.is_sqlite:
        target = "SQLite" if database.is_sqlite else "PostgreSQL"
        raise BackupError(f"{src} is a {kind} backup; the database {database.display_url} is {target}")
    revision = backup_revision(src)
    if revision is not None and revision not in known_revisions():
        raise RestoreRefused(
            f"{src} has schema {revision}, newer than this code knows; restore it with the version that made it"
        )
    problems = sqlite_problems(src, revision) if kind == "sqlite" else pg_problems(_listing(src), _our_tables())
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise RestoreRefused(f"{src} is not a backup of ours: {'; '.join(problems[:3])}{more}")
    lanes = lane_count(database)
    if lanes and not force:
        raise RestoreRefused(f"{database.display_url} holds {lanes} lanes; --force replaces them")
    if database.is_sqlite:
        _sqlite_restore(src, _sqlite_path(database))
        return BackupResult(src, revision, src.stat().st_size, tuple(operators_in(src)))
    database.engine.dispose()  # no pooled connection of ours holds a lock psql must wait for
    _pg_restore(database, src)
    _analyze(database)
    return BackupResult(src, revision, src.stat().st_size)


def _analyze(database: Database) -> None:
    """pg_dump carries rows, not the planner's statistics (PostgreSQL 15): without them the first
    plans a restarted ``serve`` prepares on the restored campus are made blind, and a prepared
    statement keeps its plan until the table is analyzed. Autovacuum would get there within a
    minute or so; ANALYZE now, as PostgreSQL's documentation advises after a restore."""
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


def lane_count(database: Database) -> int:
    """Lanes in the database (0 when it has no schema yet)."""
    with database.engine.connect() as conn:
        if not inspect(conn).has_table("lanes"):
            return 0
        return int(conn.execute(text("SELECT count(*) FROM lanes")).scalar_one())


def backup_revision(path: Path) -> str | None:
    """The schema revision recorded in a backup file (None: no alembic_version table)."""
    if _kind(path) == "sqlite":
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.DatabaseError:
            return None
        finally:
            conn.close()
        return str(row[0]) if row else None
    out = _run([_tool("pg_restore"), "--data-only", "--table=alembic_version", "--file=-", str(path)], None)
    lines = out.decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("COPY ") and "alembic_version" in line and i + 1 < len(lines) and lines[i + 1] != "\\.":
            return lines[i + 1].strip()
    return None


def _kind(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise BackupError(f"{path}: {exc.strerror or exc}") from None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PGDUMP_MAGIC):
        return "postgresql"
    raise BackupError(f"{path} is neither a SQLite database nor a pg_dump custom-format file")


def _sqlite_path(database: Database) -> Path:
    name = database.engine.url.database
    if name in (None, "", ":memory:"):
        raise BackupError("an in-memory SQLite database has nothing to back up")
    return Path(str(name))


def _same_file(dest: Path, db_path: Path) -> bool:
    names = {db_path.resolve(), Path(f"{db_path}-wal").resolve(), Path(f"{db_path}-shm").resolve()}
    return dest.resolve() in names


def _sqlite_backup(src_path: Path, tmp: Path) -> None:
    if not src_path.exists():  # sqlite3.connect would create an empty database there
        raise BackupError(f"{src_path}: no such database file")
    src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True)
    dst = sqlite3.connect(tmp)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        dst.commit()
    except sqlite3.Error as exc:
        raise BackupError(f"{src_path}: {exc}") from None
    finally:
        dst.close()
        src.close()
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())


def _sqlite_restore(src_path: Path, dst_path: Path) -> None:
    create_private(dst_path)
    src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True)
    dst = sqlite3.connect(dst_path, timeout=60)
    try:
        src.backup(dst)  # page by page under the target's write lock: readers see old or new
    except sqlite3.Error as exc:
        raise BackupError(f"{dst_path}: {exc}") from None
    finally:
        dst.close()
        src.close()


def _tool(name: str) -> str:
    local = PG_BIN / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found (apt-get install postgresql-client-15)")
    return found


def _conninfo(url: str) -> tuple[str, dict[str, str]]:
    """A libpq conninfo without the password, and the environment carrying it."""
    from psycopg2.extensions import make_dsn, parse_dsn

    params = parse_dsn(libpq_url(url))
    env = child_environment()
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = password
    return make_dsn(**params), env


def _pg_dump(url: str, fd: int) -> None:
    with open(fd, "wb", closefd=True) as out:
        dsn, env = _conninfo(url)
        _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--dbname={dsn}"], env, out)
        out.flush()
        os.fsync(out.fileno())


def _pg_restore(database: Database, src: Path) -> None:
    """The backup's SQL through psql in one transaction (all or nothing), after dropping the
    target's tables that the backup lacks: an older backup restored over a newer schema must not
    leave a newer table behind for the next migration to trip over ("already exists")."""
    dsn, env = _conninfo(database.url)
    in_dump = set(_dump_tables(src))
    with database.engine.connect() as conn:
        extra = sorted(set(inspect(conn).get_table_names(schema="public")) - in_dump)
    drops = [f'--command=DROP TABLE IF EXISTS public."{name}" CASCADE' for name in extra]
    script = [_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--no-privileges", "--file=-", str(src)]
    psql = [_tool("psql"), "--no-psqlrc", "--single-transaction", "--set=ON_ERROR_STOP=1", "--quiet"]
    try:
        producer = subprocess.Popen(script, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise BackupError(f"pg_restore: {exc}") from None
    try:
        _run([*psql, *drops, "--file=-", f"--dbname={dsn}"], env, stdin=producer.stdout)
    finally:
        if producer.stdout is not None:
            producer.stdout.close()
        errors = producer.stderr.read() if producer.stderr is not None else b""
        code = producer.wait(TOOL_TIMEOUT_S)
    if code != 0:
        lines = errors.decode("utf-8", "replace").strip().splitlines()
        raise BackupError(f"pg_restore: {lines[0] if lines else f'exit {code}'}")


def _listing(src: Path) -> str:
    """A custom-format dump's table of contents (``pg_restore --list``)."""
    return _run([_tool("pg_restore"), "--list", str(src)], None).decode("utf-8", "replace")


def _our_tables() -> set[str]:
    from viplanes.store.models import Base

    return set(Base.metadata.tables) | {"alembic_version"}


def _dump_tables(src: Path) -> list[str]:
    """The tables of a custom-format dump, from its table of contents (``pg_restore --list``)."""
    out = []
    for line in _listing(src).splitlines():
        parts = line.split()
        if not line.startswith(";") and "TABLE" in parts and parts.index("TABLE") + 2 < len(parts):
            i = parts.index("TABLE")
            if parts[i + 1] == "public":  # "TABLE DATA public x" is the rows, not the table
                out.append(parts[i + 2])
    return out


def _run(
    argv: list[str], env: dict[str, str] | None, stdout: IO[bytes] | None = None, stdin: IO[bytes] | None = None
) -> bytes:
    try:
        done = subprocess.run(
            argv,
            env=env,
            stdin=stdin,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackupError(f"{Path(argv[0]).name}: {exc}") from None
    if done.returncode != 0:
        first = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise BackupError(f"{Path(argv[0]).name}: {first[0] if first else f'exit {done.returncode}'}")
    return done.stdout or b""
