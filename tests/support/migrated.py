"""A SQLite schema migrated once per test process and copied into every new database after it.

Why: ``Database.create_all`` runs every Alembic migration on each fresh SQLite file (0.1-0.3 s,
many of them table rebuilds), and most unit tests build an app on a fresh file: a quarter of the
unit suite's time went there. The unit conftest routes ``create_all`` on an *empty* SQLite
database here; the template was made by the real migrations (``upgrade``), and SQLite's backup API
copies it page for page, ``alembic_version`` included, so each test still gets its own fresh
database at head. A database that holds anything (a partly migrated one, one at head) and
PostgreSQL (``tests/support/postgres.py`` clones its own template) keep the real path, as do the
tests that call ``upgrade`` themselves (the upgrade, downgrade and models-agree tests).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from viplanes.store.db import Database
from viplanes.store.migrations import upgrade


class SchemaTemplate:
    """The head schema in ``folder``/template.db, migrated on first use."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "template.db"
        self._lock = threading.Lock()  # tests start apps from threads too
        self._ready = False

    def _build(self) -> None:
        with self._lock:
            if self._ready:
                return
            made = Database(f"sqlite:///{self.path}")
            try:
                upgrade(made.engine)  # the real migrations, once
            finally:
                made.dispose()  # checkpoints the WAL: the file alone holds the schema
            self._ready = True

    def fill(self, db: Database) -> bool:
        """Copy the template into ``db`` if it is an empty SQLite database; False (nothing done)
        for PostgreSQL or a database that already holds a table."""
        if not db.is_sqlite:
            return False
        raw = db.engine.raw_connection()
        try:
            target: Any = raw.driver_connection  # pysqlite's connection, as Alembic would use
            if target.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                return False
            self._build()
            source = sqlite3.connect(self.path)
            try:
                source.backup(target)
            finally:
                source.close()
            return True
        finally:
            raw.close()
