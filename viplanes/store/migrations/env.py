"""Alembic environment: runs online against the engine the caller handed in (or the URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, text

from viplanes.store.models import Base

config = context.config
target_metadata = Base.metadata
MIGRATION_STATEMENT_MS = "600000"  # lock_timeout stays the connection's (pgconnect.LOCK_TIMEOUT_S)


def run() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        url = config.get_main_option("sqlalchemy.url")
        if url is None:
            raise RuntimeError("alembic: neither an engine handed in nor sqlalchemy.url set")
        engine = create_engine(url)
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:  # SQLite's batch rebuilds drop tables others point at (0009: grants): keys are
            # checked once, at the end (PRAGMA foreign_key_check), not at each drop
            _dbapi_pragma(conn, "foreign_keys=OFF")
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=conn.dialect.name == "sqlite"
        )
        with context.begin_transaction():
            if conn.dialect.name == "postgresql":  # a migration may rewrite a big table: not the pool's 30 s
                conn.execute(text("SELECT set_config('statement_timeout', :ms, true)"), {"ms": MIGRATION_STATEMENT_MS})
            context.run_migrations()
            if sqlite:
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"migration left broken foreign keys: {broken[:5]}")
        conn.commit()
        if sqlite:
            _dbapi_pragma(conn, "foreign_keys=ON")


def _dbapi_pragma(conn: Connection, pragma: str) -> None:
    """A PRAGMA on the DB-API connection, outside any transaction (inside one SQLite ignores
    ``foreign_keys``)."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    cur = raw.cursor()
    cur.execute(f"PRAGMA {pragma}")
    cur.close()


run()
