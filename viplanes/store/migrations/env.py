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
        url = config.get_main_option("sqlalchemy.url")
        if url is None:
            raise RuntimeError("alembic: neither an engine handed in nor sqlalchemy.url set")
        engine = create_engine(url)
    with engine.connect() as conn:
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=conn.dialect.name == "sqlite"
        )
        with context.begin_transaction():
            context.run_migrations()
        conn.commit()


run()
