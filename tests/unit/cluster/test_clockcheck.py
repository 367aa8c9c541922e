"""A controller refuses to start on a clock far from the database's (issue 28, item 4): it would
anchor its lane clock on the wrong time for its whole life (viplanes/domain/clock.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli.main import main
from viplanes.cluster.clockcheck import ClockSkewError, check_clock, clock_skew
from viplanes.store.db import Database


@pytest.fixture
def sqlite_db(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'skew.db'}")
    yield db
    db.dispose()


def test_a_synchronised_clock_passes(sqlite_db) -> None:
    skew, rtt = clock_skew(sqlite_db)
    assert abs(skew) < 0.5 and rtt < 1.0
    assert abs(check_clock(sqlite_db, 5.0)) < 0.5


def test_a_clock_an_hour_off_is_refused_either_way(sqlite_db) -> None:
    with pytest.raises(ClockSkewError, match=r"3600\.0 s ahead of the database's"):
        check_clock(sqlite_db, 5.0, wall=lambda: time.time() + 3600)
    with pytest.raises(ClockSkewError, match=r"behind the database's"):
        check_clock(sqlite_db, 5.0, wall=lambda: time.time() - 3600)
    assert check_clock(sqlite_db, 0.0, wall=lambda: time.time() + 3600) == 0.0  # 0: no check


def test_controller_cluster_exits_3_with_one_line(tmp_path, monkeypatch) -> None:
    """The wall clock an hour ahead; SQLite's clock is the process's, so the database is told the
    real time through its own function (``julianday('now')`` reads the C library, not ``time``)."""
    import viplanes.cli.controller as command

    monkeypatch.setattr(command, "wait_until_stopped", lambda: None)  # a passed check must not hang the test
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    result = CliRunner().invoke(
        main,
        [
            "controller",
            "cluster",
            "--db",
            f"sqlite:///{tmp_path / 'c.db'}",
            "--insecure-tcp",
            "--openflow",
            "127.0.0.1:1",
        ],
    )
    assert result.exit_code == 3, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]  # not SQLAlchemy's warnings
    assert len(errors) == 1 and "3600.0 s ahead of the database's" in errors[0], result.output


def test_the_api_command_exits_3_too(tmp_path, monkeypatch) -> None:
    """API processes write lane windows on their clock: the same refusal before any worker forks."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    result = CliRunner().invoke(main, ["api", "--db", f"sqlite:///{tmp_path / 'a.db'}", "--listen", "127.0.0.1:1"])
    assert result.exit_code == 3, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "3600.0 s behind the database's" in errors[0], result.output
