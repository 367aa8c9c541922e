"""Alembic environment: runs online against the engine the caller handed in (or the URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from viplanes.store.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=conn.dialect.name == "sqlite"
        )
        with context.begin_transaction():
            context.run_migrations()
        conn.commit()


run()
