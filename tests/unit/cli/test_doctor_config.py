"""`viplanes doctor` checks the configuration file and each switch's features (issue 29).

The attacks and accidents stood for: a misspelt `[serve]` key that a start would refuse (found
at the next restart, at night); the database password in a file its group can read; a switch
profile that claims meters the hardware lacks; a NAT'd host behind a border that cannot translate.
Before, doctor said nothing of any of them and exited 0 for them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import yaml
from click.testing import CliRunner

from tests.support.paths import CAMPUS_YAML
from viplanes.cli.doctor.checks import FAIL, OK
from viplanes.cli.doctor.config import check_config
from viplanes.cli.doctor.features import check_features
from viplanes.cli.main import COMMANDS, main
from viplanes.topologies.loader import load_topology, parse_topology

SECRET_DB = 'url = "postgresql://viplanes:hunter2@db.campus/viplanes"'


def command_of(table: str) -> click.Command | None:
    return main.get_command(click.Context(main), table) if table in COMMANDS else None


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "viplanes.toml"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def by_check(found: list) -> dict[str, tuple[str, str]]:
    return {f.check: (f.status, f.detail) for f in found}


def test_a_misspelt_command_key_fails_with_the_key_named(tmp_path: Path) -> None:
    path = write(tmp_path, '[serve]\ntik = 0.5\n[db]\nurl = "sqlite:///x.db"\n')
    found = by_check(check_config(str(path), command_of))
    status, detail = found["config.keys"]
    assert status == FAIL and "[serve] tik: unknown key" in detail


def test_the_cli_reports_the_misspelt_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[serve]\nmax_clock_skw = 2.0\n")
    args = ["--config", str(path), "doctor", "--json", "--db", str(tmp_path / "none.db"), "--api", "http://127.0.0.1:1"]
    result = CliRunner().invoke(main, args)
    checks = {c["check"]: c for c in json.loads(result.output)["checks"]}
    assert checks["config.keys"]["status"] == FAIL and "max_clock_skw" in checks["config.keys"]["detail"]


def test_a_good_file_is_ok(tmp_path: Path) -> None:
    path = write(tmp_path, f'[db]\n{SECRET_DB}\n[serve]\ntick = 0.5\n[doctor]\nmax_clock_skew = 2.0\n')
    found = by_check(check_config(str(path), command_of))
    assert found["config.keys"][0] == OK and found["config.permissions"][0] == OK, found


def test_a_secret_readable_by_a_group_fails(tmp_path: Path) -> None:
    path = write(tmp_path, f"[db]\n{SECRET_DB}\n", mode=0o640)
    status, detail = by_check(check_config(str(path), command_of, group_name=lambda gid: "staff"))["config.permissions"]
    assert status == FAIL and "[db] url" in detail and "640" in detail and "hunter2" not in detail


def test_the_service_group_may_read_the_secret(tmp_path: Path) -> None:
    """deploy/systemd: root owns the file, group viplanes (the units) reads it."""
    path = write(tmp_path, f"[db]\n{SECRET_DB}\n", mode=0o640)
    found = by_check(check_config(str(path), command_of, group_name=lambda gid: "viplanes"))
    assert found["config.permissions"][0] == OK


def test_unparsable_and_missing_files(tmp_path: Path) -> None:
    bad = write(tmp_path, "[serve\n")
    (only,) = check_config(str(bad), command_of)
    assert only.status == FAIL and "not TOML" in only.detail
    (gone,) = check_config(str(tmp_path / "absent.toml"), command_of)
    assert gone.status == FAIL and "no such file" in gone.detail  # --config names a file that must be there


def test_a_profile_claiming_what_the_switch_lacks_fails() -> None:
    topo = load_topology(CAMPUS_YAML)
    s1 = topo.switches[0]
    report = {"switches": [{"dpid": s1.dpid, "connected": True, "features": {"meters": False, "conntrack": True}}]}
    found = by_check(check_features(topo, report))
    status, detail = found[f"features {s1.name}"]
    assert status == FAIL and "meters" in detail and "conntrack" not in detail
    assert all(s == OK for name, (s, _) in found.items() if name != f"features {s1.name}")


def test_lanes_needing_a_feature_no_profile_gives_fail() -> None:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == "s3":  # the border, where NAT'd lanes are translated
            sw["features"] = {"nat": False}
    found = check_features(parse_topology(data, "c.yaml"), None)
    lanes = [f for f in found if f.check == "features.lanes"]
    assert lanes and all(f.status == FAIL and "lacks nat" in f.detail for f in lanes)


def test_the_campus_profiles_are_green() -> None:
    found = check_features(load_topology(CAMPUS_YAML), {"switches": []})
    assert {f.status for f in found} == {OK} and len(found) == 4
