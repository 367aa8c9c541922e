"""The unit suite's migrated-once schema (tests/support/migrated.py): a database filled from it is
the one Alembic makes, and a database that already holds anything keeps the real migrations."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from tests.support.migrated import SchemaTemplate
from viplanes.store.backup import max_revision
from viplanes.store.db import Database
from viplanes.store.migrations import current, upgrade


def schema(db: Database) -> list[tuple[str, str, str, list[str]]]:
    """Every table and index with its definition's lines in order of their text: Alembic's batch
    rebuilds write a table's FOREIGN KEY clauses in an order that varies from run to run."""
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"))
        return [(kind, name, table, sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))
                for kind, name, table, sql in rows]  # fmt: skip


def test_a_database_filled_from_the_template_is_the_one_alembic_makes(tmp_path: Path) -> None:
    migrated, filled = Database(f"sqlite:///{tmp_path / 'a.db'}"), Database(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        upgrade(migrated.engine)
        assert SchemaTemplate(tmp_path).fill(filled)
        assert schema(filled) == schema(migrated) and len(schema(filled)) > 10
        assert current(filled.engine) == current(migrated.engine) == max_revision()
        with filled.write() as s:  # a working database of its own, not a view of the template
            s.execute(text("INSERT INTO principals (name, role, disabled, created_at) VALUES ('x', 'operator', 0, 0)"))
    finally:
        migrated.dispose()
        filled.dispose()


def test_a_database_that_holds_a_table_keeps_the_real_migrations(tmp_path: Path) -> None:
    """The upgrade tests start from an old revision: ``create_all`` must migrate it, not replace it."""
    d = Database(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        upgrade(d.engine, "0003")
        assert not SchemaTemplate(tmp_path).fill(d)
        assert current(d.engine) == "0003"
        d.create_all()  # the unit suite's create_all (conftest): the real path for this one
        assert current(d.engine) == max_revision()
    finally:
        d.dispose()
