"""`viplanes doctor`: each broken thing shows as FAIL with its fix; a healthy part as ok. The
lab-campus run (all green, then a switch cut off) is tests/integration/test_doctor_lab.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from viplanes import pki
from viplanes.cli.doctor.checks import FAIL, OK, WARN, Finding, check_database, check_pki, check_switches
from viplanes.cli.doctor.command import EXIT_FAIL, EXIT_OK, EXIT_WARN, exit_code
from viplanes.cli.main import main
from viplanes.store.db import Database
from viplanes.store.migrations import upgrade
from viplanes.topologies.model import Topology


def now() -> dt.datetime:
    """The present when a check runs: a module-level constant, taken at collection, lay minutes
    before the certificates a fixture issued on a loaded machine ("not valid before")."""
    return dt.datetime.now(dt.UTC)


def by_check(found: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in found}


@pytest.fixture
def migrated(tmp_path: Path) -> Any:
    d = Database(f"sqlite:///{tmp_path / 'vl.db'}")
    d.create_all()
    yield d
    d.dispose()


@pytest.fixture
def pki_dir(campus_pki: Path, tmp_path: Path) -> Path:
    d = tmp_path / "pki"
    shutil.copytree(campus_pki, d)
    return d


def test_healthy_database_is_all_ok(migrated: Database) -> None:
    found = check_database(migrated)
    assert [f.status for f in found] == [OK] * len(found), found
    assert {"database", "database.schema", "database.writes", "database.permissions"} <= set(by_check(found))


def test_unmigrated_database_fails_with_the_upgrade_command(tmp_path: Path) -> None:
    d = Database(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(d.engine, "0005")
    try:
        schema = by_check(check_database(d))["database.schema"]
    finally:
        d.dispose()
    assert schema.status == FAIL and "0005" in schema.detail and "viplanes db upgrade" in schema.fix


def test_a_newer_schema_fails(migrated: Database) -> None:
    from sqlalchemy import text

    with migrated.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    schema = by_check(check_database(migrated))["database.schema"]
    assert schema.status == FAIL and "newer" in schema.detail


def test_unwritable_database_fails(migrated: Database) -> None:
    read_only = lambda _p: SimpleNamespace(f_flag=os.ST_RDONLY, f_bavail=10**6, f_frsize=4096)  # noqa: E731
    writes = by_check(check_database(migrated, statvfs=read_only))["database.writes"]
    assert writes.status == FAIL and "read-only" in writes.detail and writes.fix


def test_world_readable_database_fails(migrated: Database, tmp_path: Path) -> None:
    os.chmod(tmp_path / "vl.db", 0o644)
    perms = by_check(check_database(migrated))["database.permissions"]
    assert perms.status == FAIL and "0644" in perms.detail and "chmod 600" in perms.fix


def test_unreachable_database_fails(tmp_path: Path) -> None:
    d = Database("postgresql://nobody@127.0.0.1:1/none")
    try:
        found = check_database(d)
    finally:
        d.dispose()
    assert found[0].status == FAIL and "VIPLANES_DB_URL" in found[0].fix


def test_healthy_pki_is_ok(pki_dir: Path, topo: Topology) -> None:
    found = check_pki(pki_dir, (), topo, now())
    assert all(f.status == OK for f in found), [f.line() for f in found]
    assert "pki.switch-host1.crt" in by_check(found)


def test_certificate_expiring_within_30_days_warns(pki_dir: Path, topo: Topology) -> None:
    soon = now() + dt.timedelta(days=pki.LEAF_DAYS - 10)
    ctl = by_check(check_pki(pki_dir, (), topo, soon))["pki.controller.crt"]
    assert ctl.status == WARN and "expires in" in ctl.detail


def test_expired_certificate_fails_with_its_fix(pki_dir: Path, topo: Topology) -> None:
    later = now() + dt.timedelta(days=pki.LEAF_DAYS + 1)
    found = by_check(check_pki(pki_dir, (), topo, later))
    assert found["pki.controller.crt"].status == FAIL and "expired" in found["pki.controller.crt"].detail
    assert "viplanes pki" in found["pki.controller.crt"].fix
    assert found["pki.switch-host3.crt"].status == FAIL
    assert found["pki.ca.crt"].status == OK  # ten years


def test_missing_pki_files_fail(tmp_path: Path, topo: Topology) -> None:
    found = check_pki(tmp_path, (), topo, now())
    assert found[0].status == FAIL and "ca.crt" in found[0].detail and "viplanes pki init" in found[0].fix


def test_readable_key_fails(pki_dir: Path, topo: Topology) -> None:
    os.chmod(pki_dir / "controller.key", 0o644)
    key = by_check(check_pki(pki_dir, (), topo, now()))["pki.key"]
    assert key.status == FAIL and "chmod 600" in key.fix


def test_pins(pki_dir: Path, topo: Topology) -> None:
    real = pki.cert_sha256(pki.load_cert(pki_dir / "switch-host1.crt"))
    assert by_check(check_pki(pki_dir, (real,), topo, now()))["pki.pins"].status == OK
    stray = by_check(check_pki(pki_dir, ("ab" * 32,), topo, now()))["pki.pins"]
    assert stray.status == WARN and "abababababab" in stray.detail
    bad = by_check(check_pki(pki_dir, ("nothex",), topo, now()))["pki.pins"]
    assert bad.status == FAIL


def report(topo: Topology, skip: str = "", unreconciled: str = "") -> dict[str, Any]:
    return {
        "ready": not skip,
        "switches": [
            {"name": s.name, "dpid": s.dpid, "connected": True, "reconciled": s.name != unreconciled}
            for s in topo.switches
            if s.name != skip
        ],
    }


def test_switches(topo: Topology) -> None:
    assert all(f.status == OK for f in check_switches(topo, report(topo), "api"))
    name = topo.switches[1].name
    missing = by_check(check_switches(topo, report(topo, skip=name), "api"))[f"switch {name}"]
    assert missing.status == FAIL and "set-controller" in missing.fix
    late = by_check(check_switches(topo, report(topo, unreconciled=name), "api"))[f"switch {name}"]
    assert late.status == WARN
    assert check_switches(topo, None, "down")[0].status == FAIL


def test_exit_codes() -> None:
    ok, warn, fail = Finding("a", OK, ""), Finding("b", WARN, ""), Finding("c", FAIL, "")
    assert (exit_code([ok]), exit_code([ok, warn]), exit_code([warn, fail])) == (EXIT_OK, EXIT_WARN, EXIT_FAIL)
    assert len({EXIT_OK, EXIT_WARN, EXIT_FAIL, 2}) == 4  # 2 stays click's usage error


def test_cli_on_a_missing_database_neither_creates_it_nor_passes(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    result = CliRunner().invoke(main, ["doctor", "--db", str(path), "--api", "http://127.0.0.1:1", "--json"])
    assert result.exit_code == EXIT_FAIL
    body = json.loads(result.output)
    first = body["checks"][2]  # after the config file's and the settings' checks (doctor.py)
    assert [c["check"] for c in body["checks"][:2]] == ["config", "settings"]
    assert body["status"] == "fail" and first["check"] == "database"
    assert "does not exist" in first["detail"]
    assert not path.exists()


def test_links_down_or_unverified_are_named(topo: Topology) -> None:
    body = report(topo)
    body["links"] = [
        {"name": "s1:3-s2:1", "state": "up", "reason": "", "bypass": False},
        {"name": "s2:3-s3:3", "state": "down", "reason": "port s3:3 down", "bypass": True},
    ]
    found = by_check(check_switches(topo, body, "api"))
    assert found["link s1:3-s2:1"].status == OK
    down = found["link s2:3-s3:3"]
    assert down.status == FAIL and down.detail == "down: port s3:3 down"


def test_doctor_reads_switch_names_with_an_operator_token_only(world: Any, topo: Topology) -> None:
    """/readyz names nothing to anyone (api/health.py): doctor reads the whole report with an
    operator's token, and without one says what is missing instead of blaming the switches."""
    from viplanes.cli.apiserver import ServerLimits, create_api_server
    from viplanes.cli.doctor.checks import TOKEN_FIX, fetch_readiness

    server = create_api_server(world.app, "127.0.0.1", 0, None, ServerLimits(threads=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        world.dataplane.away = ["switch s1 (dpid 1)"]
        report, source, _ = fetch_readiness(url, None, token=world.tokens["root"])
        assert report is not None and source == f"{url}/api/v1/readiness"
        assert by_check(check_switches(topo, report, source))["switch s1"].status == FAIL
        report, source, fix = fetch_readiness(url, None)
        assert report is None and fix == TOKEN_FIX and "switches ready" in source, source
        (only,) = check_switches(topo, report, source, fix=fix)
        assert only.status == FAIL and "--token" in only.fix
        _, source, fix = fetch_readiness(url, None, token=world.tokens["alice"])  # a researcher's
        assert "refused the token (403)" in source and fix == TOKEN_FIX
    finally:
        server.stop()
        thread.join(10)
