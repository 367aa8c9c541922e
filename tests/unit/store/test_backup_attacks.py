"""Backups, restores and the switch deny-list against a local attacker (issue 41): a file planted
under the predictable temporary name, a symlink planted beside the deny-list, a directory others
may write to, and a crafted SQLite backup carrying a trigger that hides an extra operator."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.clock import FakeClock
from tests.support.world import make_world
from viplanes.cli.main import main
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.store.backupcheck import pg_problems
from viplanes.store.db import Database
from viplanes.topologies.model import Topology

NOBODY = 65534
FP = "ab" * 32


@pytest.fixture
def filled(tmp_path: Path, topo: Topology) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    w = make_world(url, FakeClock(), MemoryDataplane(), topo)
    assert w.lane().status_code in (200, 201, 202)
    d: Database = w.app.extensions["viplanes"].db
    yield url
    d.dispose()


def backup(url: str, file: Path) -> object:
    return CliRunner().invoke(main, ["db", "backup", "--db", url, str(file)])


@pytest.mark.skipif(os.geteuid() != 0, reason="plants a file owned by another user")
def test_a_partial_planted_by_another_user_never_becomes_the_backup(filled: str, tmp_path: Path) -> None:
    out = tmp_path / "backups"
    out.mkdir(mode=0o1777)  # shared, sticky (like /tmp): the attacker may create files here
    out.chmod(0o1777)
    planted = out / ".vl.backup.partial"
    planted.write_bytes(b"")
    os.chown(planted, NOBODY, NOBODY)
    planted.chmod(0o666)
    r = backup(filled, out / "vl.backup")
    assert r.exit_code == 0, r.output
    st = (out / "vl.backup").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (os.geteuid(), 0o600), f"backup owned by uid {st.st_uid}"


def test_a_backup_into_a_directory_others_may_swap_is_refused(filled: str, tmp_path: Path) -> None:
    out = tmp_path / "open"
    out.mkdir()
    out.chmod(0o777)  # world-writable, no sticky bit
    r = backup(filled, out / "vl.backup")
    assert r.exit_code == 5 and "writable by others" in r.output, r.output
    assert not (out / "vl.backup").exists()


def test_pki_deny_does_not_follow_a_symlink_planted_beside_the_list(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    pki = tmp_path / "pki"
    pki.mkdir(mode=0o700)
    (pki / "denied.tmp").symlink_to(victim)
    r = CliRunner().invoke(main, ["pki", "deny", "--file", str(pki / "denied"), FP])
    assert r.exit_code == 0, r.output
    assert victim.read_text() == "precious\n"
    assert (pki / "denied").read_text().startswith(FP)


def crafted(filled: str, tmp_path: Path) -> Path:
    """The live database's backup with an extra operator and a trigger that deletes its audit rows."""
    file = tmp_path / "crafted.backup"
    assert backup(filled, file).exit_code == 0
    conn = sqlite3.connect(file)
    now = dt.datetime.now(dt.UTC).timestamp()
    conn.execute(
        "INSERT INTO principals (name, role, disabled, created_at) VALUES ('olaf-backdoor', 'operator', 0, ?)", (now,)
    )
    conn.execute(
        "CREATE TRIGGER hide AFTER INSERT ON audit_events WHEN NEW.actor = 'olaf-backdoor' "
        "BEGIN DELETE FROM audit_events WHERE id = NEW.id; END"
    )
    conn.commit()
    conn.close()
    return file


def test_restore_refuses_a_backup_carrying_a_trigger(filled: str, tmp_path: Path) -> None:
    file = crafted(filled, tmp_path)
    target = f"sqlite:///{tmp_path / 'restored.db'}"
    r = CliRunner().invoke(main, ["db", "restore", "--db", target, str(file)])
    assert r.exit_code == 4, r.output
    assert "trigger 'hide'" in r.output and "not in the schema" in r.output, r.output
    restored = sqlite3.connect(tmp_path / "restored.db")
    try:
        triggers = restored.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    except sqlite3.DatabaseError:
        triggers = []
    restored.close()
    assert triggers == []


def test_a_restore_names_the_operators_it_brought(filled: str, tmp_path: Path) -> None:
    file = tmp_path / "ok.backup"
    assert backup(filled, file).exit_code == 0
    r = CliRunner().invoke(main, ["db", "restore", "--db", f"sqlite:///{tmp_path / 'r.db'}", str(file)])
    assert r.exit_code == 0 and "operators: root" in r.output, r.output


def test_a_dump_with_a_trigger_or_a_foreign_table_is_refused() -> None:
    listing = (
        ";\n; Archive created at 2026-11-28\n"
        "215; 1259 16386 TABLE public lanes viplanes\n"
        "216; 1259 16390 TABLE public stolen viplanes\n"
        "3301; 0 16386 TABLE DATA public lanes viplanes\n"
        "3350; 2620 16400 TRIGGER public audit_events hide viplanes\n"
        "3351; 1255 16401 FUNCTION public hide() viplanes\n"
        "3100; 2606 16420 CONSTRAINT public lanes lanes_pkey viplanes\n"
    )
    problems = pg_problems(listing, {"lanes", "audit_events", "alembic_version"})
    assert len(problems) == 3, problems
    assert any("TRIGGER" in p for p in problems) and any("FUNCTION" in p for p in problems)
    assert any("stolen" in p for p in problems)
