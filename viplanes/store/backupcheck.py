"""What a backup must hold before ``db restore`` loads it: exactly the schema our migrations make.

A backup file is data from wherever it came from. A crafted one can carry schema objects of its
own that then live on in the restored database and survive ``db upgrade``: a trigger that deletes
the audit rows of an extra operator, a view, a table the code never reads. So a restore compares
the backup's schema objects with those of an empty database migrated to the backup's own revision
(SQLite: ``sqlite_master``; PostgreSQL: the dump's table of contents) and refuses any other, and a
SQLite backup must pass ``PRAGMA integrity_check``. Rows are not judged (an operator's own backup
holds their operators): the restore names the operators it brought in, so an unexpected one shows.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

# kinds of entries in `pg_restore --list` that our migrations make (anything else is refused)
PG_ALLOWED = (
    "TABLE DATA",
    "TABLE",
    "SEQUENCE SET",
    "SEQUENCE OWNED BY",
    "SEQUENCE",
    "DEFAULT",
    "FK CONSTRAINT",
    "CONSTRAINT",
    "INDEX",
    "SCHEMA",
    "COMMENT",
    "ENCODING",
    "STDSTRINGS",
    "SEARCHPATH",
    "DATABASE",
)


def _objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    rows = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    return {(str(kind), str(name)) for kind, name in rows}


def reference_objects(revision: str | None) -> set[tuple[str, str]]:
    """The (type, name) schema objects of an empty SQLite database migrated to ``revision``."""
    if revision is None:
        return set()
    from viplanes.store.migrations import upgrade

    with tempfile.TemporaryDirectory(prefix="viplanes-restore-check-") as tmp:
        engine = create_engine(f"sqlite:///{Path(tmp) / 'reference.db'}")
        try:
            upgrade(engine, revision)
        finally:
            engine.dispose()
        conn = sqlite3.connect(Path(tmp) / "reference.db")
        try:
            return _objects(conn)
        finally:
            conn.close()


def sqlite_problems(path: Path, revision: str | None) -> list[str]:
    """Why the SQLite backup at ``path`` must not be restored (empty: it may)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if check != ["ok"]:
            return [f"it fails SQLite's integrity check ({check[0][:120]})"]
        extra = sorted(_objects(conn) - reference_objects(revision))
    except sqlite3.DatabaseError as exc:
        return [f"it cannot be read as SQLite ({exc})"]
    finally:
        conn.close()
    return [f"{kind} {name!r} is not in the schema of revision {revision or 'none'}" for kind, name in extra]


def pg_problems(listing: str, known_tables: set[str]) -> list[str]:
    """Why a custom-format dump with this ``pg_restore --list`` output must not be restored."""
    out: list[str] = []
    for line in listing.splitlines():
        if not line.strip() or line.startswith(";"):
            continue
        rest = line.split(None, 3)[3] if len(line.split(None, 3)) == 4 else ""  # "ID; OID OID <type> ..."
        kind = next((k for k in PG_ALLOWED if rest.startswith(k + " ")), None)
        if kind is None:
            out.append(f"{rest.rsplit(' ', 1)[0]} is not something our migrations make")
            continue
        parts = rest[len(kind) :].split()
        if kind in ("TABLE", "TABLE DATA") and len(parts) >= 2 and parts[1] not in known_tables:
            out.append(f"{kind} {parts[0]}.{parts[1]} is not a table of ours")
    return out


def operators_in(path: Path) -> list[str]:
    """The enabled operators of a SQLite backup (named after a restore, so an unexpected one shows)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name FROM principals WHERE role = 'operator' AND NOT disabled ORDER BY name")
        return [str(r[0]) for r in rows.fetchall()]
    except sqlite3.DatabaseError:
        return []
    finally:
        conn.close()
