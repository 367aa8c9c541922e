"""Fixtures of the store's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from viplanes.store.db import Database


@pytest.fixture
def sdb(tmp_path: Path) -> Iterator[Database]:
    """A SQLite database file of this test's own with the models' tables (no migrations)."""
    d = Database(f"sqlite:///{tmp_path / 'store.db'}")
    d.create_all()
    yield d
    d.dispose()
