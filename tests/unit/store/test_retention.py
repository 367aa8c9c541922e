"""Issue 28 item 9: retention of ended lanes and audit events, exported before any delete, on
SQLite and PostgreSQL (the ``db`` fixture runs each test on both).

Before, nothing ever left ``lanes`` and ``audit_events`` (~90 MB/h at benchmark churn). The
attacks: a planted symlink or file at the export name (the rows must stay), a retention of
minutes (refused), and a prune racing live lanes (a live lane is never touched, however old)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from viplanes.cli.main import main
from viplanes.store import records as store
from viplanes.store.db import Database
from viplanes.store.models import AuditEvent, Lane, LaneCounterRow
from viplanes.store.retention import DAY_S, RetentionConfig, RetentionError, RetentionRunner, prune

NOW = 1_800_000_000.0
GRANT = {
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp"],
    "ports": [9000],
    "max_duration_s": 3600,
}


def _world(db: Database) -> tuple[int, int]:
    with db.write() as s:
        p, _ = store.create_principal(s, "alice", "researcher", NOW - 400 * DAY_S)
        g = store.create_grant(s, store.GrantInput(principal="alice", **GRANT), "root", NOW - 400 * DAY_S)
        return p.id, g.id


def _lane(db: Database, state: str, age_days: float, ended: bool = True) -> int:
    pid, gid = _ids[db.url]
    at = NOW - age_days * DAY_S
    with db.write() as s:
        lane = Lane(
            principal_id=pid,
            grant_id=gid,
            src_ip="10.1.0.10",
            dst_ip="203.0.113.10",
            protocol="tcp",
            dst_port=9000,
            duration_s=600,
            purpose="p",
            state=state,
            reason="",
            created_at=at - 600,
            starts_at=at - 600,
            expires_at=at,
            ended_at=at if ended else None,
        )
        s.add(lane)
        s.flush()
        return lane.id


def _event(db: Database, age_days: float) -> None:
    with db.write() as s:
        store.audit(s, NOW - age_days * DAY_S, "alice", "lane.request", "lane:1", "allow", "old")


_ids: dict[str, tuple[int, int]] = {}


@pytest.fixture
def seeded(db: Database) -> Database:
    _ids[db.url] = _world(db)
    return db


def _lanes(db: Database) -> dict[int, str]:
    with db.read() as s:
        return dict(s.execute(select(Lane.id, Lane.state)).all())


def _config(tmp_path: Path, **kw: float) -> RetentionConfig:
    return RetentionConfig(lane_days=90, audit_days=365, export_dir=str(tmp_path / "archive"), every_s=3600, **kw)


def test_prunes_only_ended_lanes_past_retention_after_exporting(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    old = [_lane(db, st, 100) for st in ("expired", "released", "revoked", "failed")]
    recent = _lane(db, "expired", 10)
    live = [_lane(db, st, 200, ended=False) for st in ("requested", "scheduled", "installing", "active")]
    with db.write() as s:
        s.add(LaneCounterRow(lane_id=old[0], packets=1, bytes=2, read_at=NOW))
    for age in (400, 366, 10):
        _event(db, age)
    result = prune(db, _config(tmp_path), NOW)
    print(result.line())
    assert (result.lanes, result.audit_events) == (4, 2)
    left = _lanes(db)
    assert set(left) == {recent, *live}  # every live lane stays, however old
    files = {Path(f).name.split("-")[0]: Path(f) for f in result.files}
    exported = [json.loads(line) for line in files["lanes"].read_text().splitlines()]
    assert sorted(r["id"] for r in exported) == sorted(old) and all(r["table"] == "lanes" for r in exported)
    assert {r["state"] for r in exported} == {"expired", "released", "revoked", "failed"}
    assert len(files["audit"].read_text().splitlines()) == 2
    for f in files.values():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "archive").stat().st_mode) == 0o700
    with db.read() as s:
        assert s.get(LaneCounterRow, old[0]) is None
        pruned = s.scalars(select(AuditEvent).where(AuditEvent.action == "db.prune")).all()
        assert len(pruned) == 1 and pruned[0].actor == "system" and "4 ended lanes and 2 audit" in pruned[0].reason
        assert s.scalar(select(AuditEvent.id).where(AuditEvent.at == NOW - 10 * DAY_S)) is not None
    again = prune(db, _config(tmp_path), NOW + 1)
    assert (again.lanes, again.audit_events, again.files) == (0, 0, [])  # no empty files, no audit noise


def test_planted_symlink_at_the_export_name_keeps_every_row(seeded: Database, tmp_path: Path) -> None:
    """The attack: someone who can write the export directory plants the next file name as a
    symlink to a file of theirs (or ours). The export refuses it and nothing is deleted."""
    db = seeded
    ids = [_lane(db, "expired", 100) for _ in range(3)] + [_lane(db, "active", 1, ended=False)]
    archive = tmp_path / "archive"
    archive.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(NOW))
    (archive / f"lanes-{stamp}-{os.getpid()}.jsonl").symlink_to(victim)
    with pytest.raises(OSError):
        prune(db, _config(tmp_path), NOW)
    assert set(_lanes(db)) == set(ids) and victim.read_text() == "precious\n"


def test_export_directory_that_is_a_file_deletes_nothing(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    ids = [_lane(db, "expired", 100), _lane(db, "active", 1, ended=False)]
    (tmp_path / "archive").write_text("not a directory")
    with pytest.raises(RetentionError):
        prune(db, _config(tmp_path), NOW)
    assert set(_lanes(db)) == set(ids)


@pytest.mark.parametrize("days", [0.5, 0.001, -1.0, float("nan")])
def test_retention_under_a_day_is_refused(seeded: Database, tmp_path: Path, days: float) -> None:
    db = seeded
    _lane(db, "expired", 2)
    _event(db, 2)
    with pytest.raises(RetentionError):
        prune(db, RetentionConfig(lane_days=days, audit_days=days, export_dir=str(tmp_path / "a")), NOW)
    assert len(_lanes(db)) == 1


def test_newest_row_stays_so_ids_are_never_reused(seeded: Database, tmp_path: Path) -> None:
    """SQLite gives a new row max(id)+1: pruning the newest lane would hand its id to the next."""
    db = seeded
    ids = [_lane(db, "expired", 100) for _ in range(3)]
    prune(db, _config(tmp_path), NOW)
    assert set(_lanes(db)) == {ids[-1]}
    assert _lane(db, "active", 0, ended=False) > ids[-1]


def test_batches_export_every_row_once(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    ids = [_lane(db, "released", 100 + i) for i in range(7)] + [_lane(db, "active", 0, ended=False)]
    result = prune(db, _config(tmp_path, batch=2), NOW)
    rows = [json.loads(x)["id"] for f in result.files for x in Path(f).read_text().splitlines()]
    assert sorted(rows) == sorted(ids[:7]) and set(_lanes(db)) == {ids[7]}


def test_two_pruners_at_once_export_each_row_once(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    ids = [_lane(db, "expired", 100) for _ in range(40)] + [_lane(db, "active", 0, ended=False)]
    results = []
    others = [Database(db.url) for _ in range(2)]

    def run(i: int) -> None:
        cfg = RetentionConfig(lane_days=90, audit_days=0, export_dir=str(tmp_path / f"a{i}"), batch=3)
        results.append(prune(others[i], cfg, NOW))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for d in others:
        d.dispose()
    rows = [json.loads(x)["id"] for r in results for f in r.files for x in Path(f).read_text().splitlines()]
    assert sorted(rows) == sorted(ids[:40]) and set(_lanes(db)) == {ids[40]}


def test_runner_prunes_and_audits_as_system(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    _lane(db, "expired", 100)
    _lane(db, "expired", 1)
    runner = RetentionRunner(db, _config(tmp_path), clock=lambda: NOW)
    result = runner.run_once()
    assert result is not None and result.lanes == 1 and runner.runs == 1


def test_cli_prune(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    _lane(db, "expired", 100 + (NOW - time.time()) / DAY_S)  # 100 days before the real now
    _lane(db, "active", 0, ended=False)
    url = db.engine.url.render_as_string(hide_password=False)
    r = CliRunner().invoke(main, ["db", "prune", "--db", url, "--export", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("pruned 1 ended lanes and 0 audit events; exported to ")
    r = CliRunner().invoke(main, ["db", "prune", "--db", url, "--export", str(tmp_path / "o"), "--lanes-days", "0.1"])
    assert r.exit_code == 2 and "at least 1 day" in r.output
    _lane(db, "expired", 100 + (NOW - time.time()) / DAY_S)
    _lane(db, "active", 0, ended=False)
    (tmp_path / "file").write_text("x")
    r = CliRunner().invoke(main, ["db", "prune", "--db", url, "--export", str(tmp_path / "file" / "sub")])
    assert r.exit_code == 3 and r.output.startswith("error: export directory"), r.output


def test_a_run_with_nothing_to_prune_leaves_no_directory(seeded: Database, tmp_path: Path) -> None:
    _lane(seeded, "expired", 1)
    result = prune(seeded, _config(tmp_path), NOW)
    assert (result.lanes, result.files) == (0, []) and not (tmp_path / "archive").exists()


@pytest.mark.parametrize("value", ["0.5", "ninety"])
def test_serve_refuses_a_bad_retention_setting(sqlite_url: str, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    import click

    from viplanes.cli.serve import retention_runner

    monkeypatch.setenv("VIPLANES_LANE_RETENTION_DAYS", value)
    d = Database(sqlite_url)
    try:
        with pytest.raises(click.ClickException, match="retention: .*VIPLANES_LANE_RETENTION_DAYS|at least 1 day"):
            retention_runner(d)
    finally:
        d.dispose()


def test_a_failed_audit_export_keeps_its_rows_and_audits_the_lanes_that_went(seeded: Database, tmp_path: Path) -> None:
    db = seeded
    _lane(db, "expired", 100)
    _lane(db, "active", 0, ended=False)
    _event(db, 400)
    _event(db, 10)  # the newest row always stays: a newer one lets the old one go
    archive = tmp_path / "archive"
    archive.mkdir(mode=0o700)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(NOW))
    (archive / f"audit-{stamp}-{os.getpid()}.jsonl").write_text("planted\n")
    with pytest.raises(FileExistsError):
        prune(db, _config(tmp_path), NOW)
    with db.read() as s:
        events = s.scalars(select(AuditEvent)).all()
    assert any(e.at == NOW - 400 * DAY_S for e in events)  # the old event stayed
    done = [e for e in events if e.action == "db.prune"]
    assert len(done) == 1 and done[0].reason.startswith("pruned 1 ended lanes and 0 audit events")
