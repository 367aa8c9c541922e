"""`viplanes db backup/restore`: a round trip keeps every row byte for byte (SQLite and real
PostgreSQL), and a restore refuses to overwrite lanes or to load a schema newer than the code."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect, text

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.cli.main import main
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.store import backup as bk
from viplanes.store.db import Database
from viplanes.topologies.model import Topology


def rows(d: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, ordered by every column (the comparison a restore must pass)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with d.engine.connect() as conn:
        for table in sorted(inspect(conn).get_table_names()):
            out[table] = sorted(tuple(r) for r in conn.execute(text(f"SELECT * FROM {table}")).all())
    return out


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)  # the usual umask: what made viplanes.db world-readable
    yield
    os.umask(old)


@pytest.fixture
def filled(db_url: str, topo: Topology, umask022: None) -> Iterator[Database]:
    """A database with principals, tokens, grants, lanes (one released, one active) and audit."""
    w = make_world(db_url, FakeClock(), MemoryDataplane(), topo)
    first = w.lane().get_json()
    assert w.client.post(f"/api/v1/lanes/{first['id']}/release", headers=w.h("alice")).status_code == 200
    assert w.lane("bob").status_code in (200, 201, 202)
    d: Database = w.app.extensions["viplanes"].db
    yield d
    d.dispose()


def other_database(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'restored.db'}"
    return str(request.getfixturevalue("pg_cluster").new_database())


def test_round_trip_keeps_every_row(filled: Database, db_url: str, tmp_path: Path, request: Any) -> None:
    before = rows(filled)
    assert before["lanes"] and before["grants"] and before["principals"] and before["audit_events"]
    assert before["api_tokens"]
    file = tmp_path / "vl.backup"
    result = CliRunner().invoke(main, ["db", "backup", "--db", db_url, str(file)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # token hashes and the audit log inside
    target = other_database(db_url, tmp_path, request)
    result = CliRunner().invoke(main, ["db", "restore", "--db", target, str(file)])
    assert result.exit_code == 0, result.output
    # a backup at head needs no upgrade; the message once said to run one anyway
    assert "nothing to upgrade" in result.output and "db upgrade" not in result.output, result.output
    restored = Database(target)
    try:
        assert rows(restored) == before
    finally:
        restored.dispose()


def test_a_restored_postgresql_database_has_its_statistics(
    filled: Database, db_url: str, tmp_path: Path, request: Any
) -> None:
    """pg_dump carries no planner statistics: without an ANALYZE after the restore every table
    stays never-analyzed (reltuples -1) until autovacuum's first pass."""
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite keeps no statistics unless told, and a backup is the whole file")
    file = tmp_path / "vl.backup"
    assert CliRunner().invoke(main, ["db", "backup", "--db", db_url, str(file)]).exit_code == 0
    target = other_database(db_url, tmp_path, request)
    result = CliRunner().invoke(main, ["db", "restore", "--db", target, str(file)])
    assert result.exit_code == 0, result.output
    restored = Database(target)
    try:
        with restored.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            blind = conn.execute(
                text("SELECT relname FROM pg_class WHERE relkind = 'r' AND reltuples < 0 AND relname = ANY(:t)"),
                {"t": sorted(tables)},
            ).scalars()
            assert sorted(blind) == [], "never analyzed after the restore"
            assert "lanes" in tables
    finally:
        restored.dispose()


def test_restore_over_lanes_needs_force(filled: Database, db_url: str, tmp_path: Path) -> None:
    """The attack (or slip): a stale backup restored over the live database drops today's lanes."""
    file = tmp_path / "old.backup"
    bk.backup(filled, file)
    with filled.engine.begin() as conn:  # a lane granted after the backup
        conn.execute(text("UPDATE lanes SET purpose = 'after the backup'"))
    result = CliRunner().invoke(main, ["db", "restore", "--db", db_url, str(file)])
    assert result.exit_code == 4, result.output
    assert "--force" in result.output and "lanes" in result.output
    with filled.engine.connect() as conn:
        assert {p for (p,) in conn.execute(text("SELECT purpose FROM lanes"))} == {"after the backup"}
    result = CliRunner().invoke(main, ["db", "restore", "--force", "--db", db_url, str(file)])
    assert result.exit_code == 0, result.output
    with filled.engine.connect() as conn:
        assert "after the backup" not in {p for (p,) in conn.execute(text("SELECT purpose FROM lanes"))}


def test_restore_refuses_a_newer_schema(filled: Database, db_url: str, tmp_path: Path, request: Any) -> None:
    """A backup from newer code would leave tables this code misreads and cannot migrate."""
    with filled.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    file = tmp_path / "future.backup"
    bk.backup(filled, file)
    assert bk.backup_revision(file) == "0099_from_the_future"
    target = other_database(db_url, tmp_path, request)
    result = CliRunner().invoke(main, ["db", "restore", "--force", "--db", target, str(file)])
    assert result.exit_code == 4, result.output
    assert "newer" in result.output
    fresh = Database(target)
    try:
        assert bk.lane_count(fresh) == 0
    finally:
        fresh.dispose()


def test_sqlite_backup_is_consistent_under_writes(tmp_path: Path, umask022: None) -> None:
    """Backed up while another connection commits: the copy passes integrity_check and holds a
    whole number of transactions (pairs of rows written together are never split)."""
    d = Database(f"sqlite:///{tmp_path / 'live.db'}")
    d.create_all()
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            with d.write() as s:
                for half in ("a", "b"):
                    s.execute(
                        text(
                            "INSERT INTO audit_events (at, actor, action, target, decision, reason) "
                            "VALUES (:at, 'w', 'pair', :t, 'allow', '')"
                        ),
                        {"at": float(i), "t": f"{i}{half}"},
                    )
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for n in range(5):
            bk.backup(d, tmp_path / f"b{n}")
    finally:
        stop.set()
        t.join()
        d.dispose()
    for n in range(5):
        conn = sqlite3.connect(tmp_path / f"b{n}")
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        (count,) = conn.execute("SELECT count(*) FROM audit_events WHERE action = 'pair'").fetchone()
        assert count % 2 == 0
        conn.close()


def test_a_backup_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a backup")
    result = CliRunner().invoke(main, ["db", "restore", "--db", f"sqlite:///{tmp_path / 'x.db'}", str(junk)])
    assert result.exit_code == 5 and "neither" in result.output


def test_pg_password_stays_off_the_command_line() -> None:
    """``ps`` shows pg_dump's arguments to every local user; the password goes in the environment."""
    dsn, env = bk._conninfo("postgresql+psycopg2://vl:s3cret@db.example:5432/viplanes")
    assert "s3cret" not in dsn and "db.example" in dsn
    assert env["PGPASSWORD"] == "s3cret"


def test_an_older_backup_over_a_newer_schema_upgrades_after(
    db_url: str, tmp_path: Path, request: Any, topo: Topology
) -> None:
    """Restored over a database at head, a backup made at 0005 leaves no newer table behind
    (0006 would fail "table already exists") and upgrades to head with its rows."""
    from viplanes.store.migrations import current, upgrade

    old_url = other_database(db_url, tmp_path, request)
    if not old_url.startswith("sqlite"):
        old_url = str(request.getfixturevalue("pg_cluster").empty_database())
    old = Database(old_url)
    upgrade(old.engine, "0005")
    with old.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO principals (name, role, disabled, created_at) VALUES ('old', 'operator', false, 1)")
        )
    file = tmp_path / "0005.backup"
    bk.backup(old, file)
    old.dispose()
    w = make_world(db_url, FakeClock(), MemoryDataplane(), topo)  # at head, with lanes
    assert w.lane().status_code == 201
    d: Database = w.app.extensions["viplanes"].db
    try:
        from viplanes.cli.backup import after_restore

        assert "`viplanes db upgrade`" in after_restore(bk.restore(d, file, force=True).revision, bk.max_revision())
        assert current(d.engine) == "0005"
        upgrade(d.engine)
        assert current(d.engine) == bk.max_revision()
        with d.engine.connect() as conn:
            assert [n for (n,) in conn.execute(text("SELECT name FROM principals"))] == ["old"]
            assert bk.lane_count(d) == 0
    finally:
        d.dispose()


def test_a_backup_onto_the_database_itself_is_refused(tmp_path: Path) -> None:
    """`db backup viplanes.db` by a slip would swap the file under a running serve, whose writes
    then go on into the unlinked old one."""
    path = tmp_path / "viplanes.db"
    d = Database(f"sqlite:///{path}")
    d.create_all()
    inode = path.stat().st_ino
    try:
        result = CliRunner().invoke(main, ["db", "backup", "--db", f"sqlite:///{path}", str(path)])
        assert result.exit_code == 5 and "the database itself" in result.output
        assert path.stat().st_ino == inode
    finally:
        d.dispose()
