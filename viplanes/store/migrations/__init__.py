"""Alembic migrations of the VIP Lanes store, run programmatically (no alembic.ini needed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

if TYPE_CHECKING:
    from alembic.config import Config

HERE = Path(__file__).resolve().parent


def alembic_config(engine: Engine | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    if engine is not None:
        # the engine only: a URL in the ConfigParser would be %-interpolated (an encoded
        # password crashed start-up) and a multi-host URL cannot be parsed by SQLAlchemy
        cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; creates every table on an empty database."""
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def current(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
