"""A host's ``cpu_cores``: absent means no limit; a bad value is one problem naming its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.support.paths import REPO
from viplanes.cli.topology import topology as topology_cli
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology


def _campus(campus_yaml: Path, **desktop: Any) -> dict[str, Any]:
    data = yaml.safe_load(campus_yaml.read_text())
    next(h for h in data["hosts"] if h["name"] == "desktop").update(desktop)
    return data


def test_absent_is_no_limit(campus_yaml: Path) -> None:
    topo = parse_topology(_campus(campus_yaml), "c.yaml")
    assert all(h.cpu_cores is None for h in topo.hosts)


@pytest.mark.parametrize("value", [0.4, 1, 0.05, 64])
def test_a_limit_in_range_is_read(campus_yaml: Path, value: float) -> None:
    topo = parse_topology(_campus(campus_yaml, cpu_cores=value), "c.yaml")
    assert topo.host("desktop").cpu_cores == float(value)
    assert topo.host("server").cpu_cores is None


@pytest.mark.parametrize("value", [0, -1, 0.01, 65, "fast", True, None, float("nan"), float("inf"), [1]])
def test_a_bad_limit_is_one_problem_naming_the_key(campus_yaml: Path, value: Any) -> None:
    with pytest.raises(TopologyError) as info:
        parse_topology(_campus(campus_yaml, cpu_cores=value), "c.yaml")
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0] == f"c.yaml: hosts[0].cpu_cores: expected a number of cores 0.05..64, got {value!r}"


def test_the_paper_campus_limits_the_desktop_only() -> None:
    topo = load_topology(REPO / "topologies" / "campus-paper.yaml")
    assert topo.host("desktop").cpu_cores == pytest.approx(0.2)
    assert [h.name for h in topo.hosts if h.cpu_cores is not None] == ["desktop"]
    plain = load_topology(REPO / "topologies" / "campus.yaml")  # the demo's and lab tests' campus
    assert all(h.cpu_cores is None for h in plain.hosts)


def test_cli_check_prints_one_line_for_a_bad_limit(tmp_path: Path, campus_yaml: Path) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(_campus(campus_yaml, cpu_cores="a quarter")))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip() == f"{path}: hosts[0].cpu_cores: expected a number of cores 0.05..64, got 'a quarter'"
