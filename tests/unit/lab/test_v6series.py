"""The v6 row of `lab report --against-paper` on the recorded v6 series
(`tests/unit/fixtures/lab/v6series.jsonl`, one `viplanes lab run --v6-only`), and its plan.

The abuse cases: a v6 "lane" that is really the firewall path (the gain a lane should give is
gone) must not read as reproduced; the series' desktop iperf3 rows must not leak into the v4
grid's headline and Table 2; results without the series keep "not measured".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.support.paths import REPO, UNIT_FIXTURES
from viplanes.cli.lab import lab
from viplanes.lab.experiments import estimate_s
from viplanes.lab.fidelity import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, findings
from viplanes.lab.fidelity.seeds import V6_TOLERANCE, v6_finding
from viplanes.lab.paper.grid import paper_plan, paper_sweep
from viplanes.lab.report import load_results
from viplanes.lab.v6series import V6_SERIES, grid_runs, v6_estimate_s, v6_plan
from viplanes.topologies.loader import load_topology

CLAIM = "a lane over IPv6 gains as much as over IPv4"


def recorded() -> list[dict[str, Any]]:
    records, bad = load_results(UNIT_FIXTURES / "lab" / "v6series.jsonl")
    assert not bad and len(records) == 4
    return records


def with_rate(records: list[dict[str, Any]], family: int, path: str, mbps: float) -> list[dict[str, Any]]:
    return [r | {"mbps": mbps} if (r["family"], r["path"]) == (family, path) else r for r in records]


def test_the_recorded_series_reproduces_with_its_numbers() -> None:
    f = v6_finding(recorded())
    assert f.verdict == REPRODUCED, f
    # x10, as every lab column: v4 14.3 -> 95.2, v6 14.1 -> 93.9 lab Mbit/s
    assert "v4 default 143 / lane 952 (6.7x)" in f.lab and "v6 default 141 / lane 939 (6.6x)" in f.lab, f.lab


def test_a_v6_lane_that_is_really_the_firewall_path_is_not_reproduced() -> None:
    """A v6 lane whose flows fell to the default path (14 Mbit/s): gain 1x against v4's 6.7x."""
    f = v6_finding(with_rate(recorded(), 6, "lane", 14.0))
    assert f.verdict == NOT_REPRODUCED, f
    assert "outside 20%" in f.reason


def test_the_tolerance_is_the_boundary() -> None:
    records = recorded()
    g4 = 95.228 / 14.312
    inside = v6_finding(with_rate(records, 6, "lane", 14.145 * g4 * (1 - V6_TOLERANCE + 0.01)))
    outside = v6_finding(with_rate(records, 6, "lane", 14.145 * g4 * (1 - V6_TOLERANCE - 0.01)))
    above = v6_finding(with_rate(records, 6, "lane", 14.145 * g4 * (1 + V6_TOLERANCE + 0.01)))
    assert (inside.verdict, outside.verdict, above.verdict) == (REPRODUCED, NOT_REPRODUCED, NOT_REPRODUCED)


def test_failed_or_missing_runs_leave_it_not_measured() -> None:
    records = recorded()
    assert v6_finding([]).verdict == NOT_APPLICABLE
    assert "not measured" in v6_finding([]).reason
    no_v6_lane = [r for r in records if (r["family"], r["path"]) != (6, "lane")]
    assert v6_finding(no_v6_lane).verdict == NOT_APPLICABLE
    failed = [r | {"ok": False, "mbps": 0.0} if r["family"] == 6 else r for r in records]
    assert v6_finding(failed).verdict == NOT_APPLICABLE
    # a zero-rate default path cannot divide: not measured, not a crash
    assert v6_finding(with_rate(records, 6, "default", 0.0)).verdict == NOT_APPLICABLE


def test_the_series_stays_out_of_the_v4_grids_findings(tmp_path: Path, no_figures: None) -> None:
    """Added to the recorded paper run, only the v6 row changes: its desktop iperf3 lane and
    default rows do not move the headline, Table 2 or any other finding."""
    recorded_run, _ = load_results(REPO / "docs" / "results" / "paper.jsonl")
    paper = [r for r in recorded_run if r.get("series") != "v6"]  # the recorded run has its own series
    both = paper + recorded()
    assert grid_runs(both) == paper
    assert findings(grid_runs(both)) == findings(paper)
    for name, records in (("paper", paper), ("both", both)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        result = CliRunner().invoke(lab, ["report", str(path), "--against-paper"])
        assert result.exit_code == 0, result.output
    old = (tmp_path / "paper-report" / "against_paper.md").read_text().splitlines()
    new = (tmp_path / "both-report" / "against_paper.md").read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert len(changed) == 1 and CLAIM in changed[0][1] and "**reproduced**" in changed[0][1], changed
    assert (tmp_path / "paper-report" / "table2.md").read_text() == (tmp_path / "both-report" / "table2.md").read_text()


def test_a_report_of_the_series_alone_works(tmp_path: Path) -> None:
    path = tmp_path / "v6.jsonl"
    path.write_text((UNIT_FIXTURES / "lab" / "v6series.jsonl").read_text())
    result = CliRunner().invoke(lab, ["report", str(path), "--against-paper"])
    assert result.exit_code == 0, result.output
    assert "**reproduced**" in next(
        line for line in (tmp_path / "v6-report" / "against_paper.md").read_text().splitlines() if CLAIM in line
    )


def test_the_plan_and_the_paper_runs_budget() -> None:
    assert [(r.family, r.path) for r in v6_plan()] == [(4, "default"), (4, "lane"), (6, "default"), (6, "lane")]
    assert {r.spec().series for r in v6_plan()} == {V6_SERIES}
    assert v6_estimate_s() < 60  # the brief's budget for the series
    sweep = paper_sweep()
    wan = load_topology(REPO / "topologies" / "campus-paper.yaml").wan
    grid = sum(estimate_s(s, sweep.size_of(s.dataset), wan=wan) for s in paper_plan())
    # the estimate runs ~9% over the wall clock (test_papergrid.py): 14.5 min of it fits 15
    assert grid + v6_estimate_s() < 14.5 * 60


def test_dry_run_lists_the_series_last_in_paper_and_alone() -> None:
    paper = CliRunner().invoke(lab, ["run", "--paper", "--dry-run"])
    assert paper.exit_code == 0, paper.output
    lines = paper.output.strip().splitlines()
    assert [ln.split()[2] + ln.split()[-1] for ln in lines[-4:]] == [
        "defaultfamily=4",
        "lanefamily=4",
        "defaultfamily=6",
        "lanefamily=6",
    ]
    assert all("series=v6" in ln for ln in lines[-4:])
    dtn = CliRunner().invoke(lab, ["run", "--paper", "--placements", "dtn", "--dry-run"])
    assert "series=v6" not in dtn.output  # the series is the desktop's
    alone = CliRunner().invoke(lab, ["run", "--v6-only", "--dry-run"])
    assert alone.exit_code == 0 and alone.output.count("series=v6") == 4, alone.output
    assert "4 runs" in alone.output


def test_v6_only_refuses_an_external_server() -> None:
    result = CliRunner().invoke(
        lab, ["run", "--v6-only", "--api", "https://x", "--token", "t", "--openflow", "127.0.0.1:6653"]
    )
    assert result.exit_code == 2 and "--v6-only builds its own" in result.output, result.output
