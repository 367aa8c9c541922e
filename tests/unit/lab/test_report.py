"""Table 2 arithmetic and the report files, on synthetic result records."""

from __future__ import annotations

import csv
import json
import statistics

import pytest

from viplanes.lab.report import load_results, markdown, stats, table2, write_report


def rec(placement, direction, path, mbps, tool="rclone", ok=True, parallel=4, chunk=8):
    return {
        "placement": placement,
        "direction": direction,
        "path": path,
        "tool": tool,
        "mbps": mbps,
        "ok": ok,
        "parallel": parallel,
        "chunk_mb": chunk,
    }


RECORDS = [
    rec("desktop", "upload", "default", 14.0),
    rec("desktop", "upload", "default", 15.0),
    rec("desktop", "upload", "lane", 80.0, parallel=16, chunk=16),
    rec("desktop", "upload", "lane", 90.0),
    rec("desktop", "upload", "lane", 1.0, ok=False),  # failed runs never count
    rec("dtn", "download", "default", 180.0),
    rec("desktop", "download", "default", 14.5),
    rec("desktop", "upload", "default", 14.2, tool="iperf3", chunk=None),
]


def test_table2_stats_and_ratio():
    rows = table2(RECORDS)
    labels = [(r.tool, r.label) for r in rows]
    assert labels == [
        ("iperf3", "desktop-up"),
        ("rclone", "desktop-up"),
        ("rclone", "desktop-down"),
        ("rclone", "dtn-down"),
    ]
    up = rows[1]
    assert up.default.n == 2 and up.default.mean == pytest.approx(14.5)
    assert up.default.std == pytest.approx(statistics.stdev([14.0, 15.0]))
    assert up.lane.max == 90.0 and up.lane.n == 2
    assert up.ratio == pytest.approx(85.0 / 14.5)
    assert rows[3].lane is None and rows[3].ratio is None


def test_single_value_has_zero_std_and_empty_is_none():
    assert stats([3.0]).std == 0.0
    assert stats([]) is None


def test_markdown_has_one_line_per_row():
    md = markdown(table2(RECORDS))
    assert md.count("\n") == 2 + 4
    assert "| rclone | desktop-up | 14.5 |" in md and "5.9x" in md


def test_load_results_skips_unreadable_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([json.dumps(RECORDS[0]), "{broken", json.dumps({"x": 1}), ""]))
    records, bad = load_results(path)
    assert records == [RECORDS[0]] and bad == 2


def test_write_report_files(tmp_path):
    files = write_report(RECORDS, tmp_path / "out")
    assert set(files) == {"markdown", "csv", "by_placement", "by_parallel", "by_chunk"}
    for name in ("by_placement", "by_parallel", "by_chunk"):
        assert files[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(files["csv"].open()))
    assert rows[1]["placement"] == "desktop" and float(rows[1]["ratio"]) == pytest.approx(85.0 / 14.5, rel=1e-3)


def test_write_report_without_rclone_skips_chunk_plot(tmp_path):
    files = write_report([r for r in RECORDS if r["tool"] == "iperf3"], tmp_path)
    assert "by_chunk" not in files and "by_placement" in files
