"""A conntrack border needs a ceiling on its connection table (issue 41): the controller sets
zone limits through ``ct_appctl``, or the operator sets them on the switch host and says so
(``ct_limits_external``). Neither: ``topology check`` exits 3 and ``doctor`` fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from viplanes.cli.doctor import checks as doctor_checks
from viplanes.cli.topology import topology as topology_cli
from viplanes.topologies.loader import load_topology

NO_CEILING = "a conntrack border with no ceiling on its connection table"


def _write(tmp_path: Path, data: dict[str, Any], **border: Any) -> Path:
    for sw in data["switches"]:
        if sw["name"] == "s3":
            sw.pop("ct_appctl", None)
            sw.update(border)
    path = tmp_path / "campus.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_border_without_a_ceiling_fails_check_and_doctor(tmp_path: Path, campus_data: dict[str, Any]) -> None:
    path = _write(tmp_path, campus_data)
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 3, result.output
    assert f"s3: {NO_CEILING}" in result.output
    finding = doctor_checks.check_conntrack_ceiling(load_topology(path))
    assert finding.status == doctor_checks.FAIL and NO_CEILING in finding.detail


def test_the_shipped_campus_sets_its_ceiling(campus_yaml: Path) -> None:
    assert CliRunner().invoke(topology_cli, ["check", str(campus_yaml)]).exit_code == 0
    assert doctor_checks.check_conntrack_ceiling(load_topology(campus_yaml)).status == doctor_checks.OK


def test_an_operator_set_ceiling_is_declared_and_its_commands_printed(
    tmp_path: Path, campus_data: dict[str, Any]
) -> None:
    path = _write(tmp_path, campus_data, ct_limits_external=True, ct_zone_limit=500)
    assert CliRunner().invoke(topology_cli, ["check", str(path)]).exit_code == 0
    out = CliRunner().invoke(topology_cli, ["ct-limits", str(path), "netdev@ovs-netdev"])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert lines and all(line.startswith("ovs-appctl dpctl/ct-set-limits netdev@ovs-netdev zone=") for line in lines)
    assert lines[0].split()[3].endswith(",limit=500")


def test_a_stateless_border_needs_no_ceiling(tmp_path: Path, campus_data: dict[str, Any]) -> None:
    path = _write(tmp_path, campus_data, conntrack=False)
    assert CliRunner().invoke(topology_cli, ["check", str(path)]).exit_code == 0
    assert CliRunner().invoke(topology_cli, ["ct-limits", str(path)]).exit_code == 3
