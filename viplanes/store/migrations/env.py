"""Alembic environment: runs online against the engine the caller handed in (or the URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

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
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=conn.dialect.name == "sqlite"
        )
        with context.begin_transaction():
            if conn.dialect.name == "postgresql":  # a migration may rewrite a big table: not the pool's 30 s
                conn.execute(text("SELECT set_config('statement_timeout', :ms, true)"), {"ms": MIGRATION_STATEMENT_MS})
            context.run_migrations()
        conn.commit()


run()
