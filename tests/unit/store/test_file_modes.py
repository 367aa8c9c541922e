"""Files holding secrets are 0600 from their first byte: the SQLite database and its -wal/-shm
(token hashes, grants, the audit log), and backups. Keys and exports: test_switch_auth.py and
test_retention.py."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from viplanes.store.db import Database
from viplanes.store.filemode import create_private, private_mode_problem


@pytest.fixture(autouse=True)
def umask022() -> Iterator[None]:
    old = os.umask(0o022)  # the usual umask, under which SQLite made viplanes.db 0644
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sqlite_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    path = tmp_path / "viplanes.db"
    d = Database(f"sqlite:///{path}")
    try:
        d.create_all()
        with d.write() as s:
            s.execute(text("INSERT INTO principals (name, role, disabled, created_at) VALUES ('x', 'operator', 0, 0)"))
        with d.engine.connect() as conn:  # the WAL files exist while a connection is open
            conn.execute(text("SELECT 1"))
            for p in (path, tmp_path / "viplanes.db-wal", tmp_path / "viplanes.db-shm"):
                assert mode(p) == 0o600, f"{p.name} is {mode(p):04o}"
    finally:
        d.dispose()


def test_a_relative_default_database_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VIPLANES_DB_URL", raising=False)
    d = Database()  # ./viplanes.db, as `viplanes serve` makes it
    try:
        d.create_all()
        assert mode(tmp_path / "viplanes.db") == 0o600
    finally:
        d.dispose()


def test_an_existing_database_keeps_its_mode_and_doctor_names_it(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    assert not create_private(path)
    assert mode(path) == 0o644
    problem = private_mode_problem(path)
    assert problem is not None and "chmod 600" in problem
