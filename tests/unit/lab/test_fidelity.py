"""The verdicts of `lab report --against-paper`, on recorded lab results and on edited copies.

The fixture (`fixtures/lab/paper_results.jsonl`) is a real `viplanes lab run --paper` of the
desktop and the DTN (WAN model on, 10 Mbit/s per connection), trimmed to the fields the report
reads. The edited copies show each verdict can come out the other way.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.support.paths import UNIT_FIXTURES
from viplanes.lab import fidelity
from viplanes.lab.fidelity import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, Finding, findings, markdown, rises

FIXTURE = UNIT_FIXTURES / "lab" / "paper_results.jsonl"


def by_claim(items: list[Finding], words: str) -> Finding:
    found = [f for f in items if words in f.claim]
    assert len(found) == 1, [f.claim for f in items]
    return found[0]


def test_recorded_run_reproduces_the_lane_gain_and_the_parallel_finding(recorded) -> None:
    items = findings(recorded)
    gain = by_claim(items, "the desktop on a lane")
    assert gain.verdict == REPRODUCED, gain
    assert by_claim(items, "DTN upload: mean rises with parallel").verdict == REPRODUCED
    assert by_claim(items, "chunk size moves throughput less").verdict == REPRODUCED
    assert by_claim(items, "one TCP stream").verdict == REPRODUCED
    assert by_claim(items, "grows about linearly").verdict == REPRODUCED
    # what the lab cannot show, it says so, with the reason
    cores = by_claim(items, "as many cores")
    assert cores.verdict == NOT_APPLICABLE and "two cores" in cores.reason
    assert by_claim(items, "Table 2 dtn-up").verdict == NOT_APPLICABLE
    # no server runs in the fixture: its findings have no data, not a guess
    server = by_claim(items, "server upload: maximum")
    assert server.verdict == NOT_APPLICABLE and server.reason == fidelity.NO_DATA
    # the lab's numbers are scaled back: the desktop's lane maximum is in the hundreds
    assert 500 <= float(gain.lab.split()[0]) <= 1000


def test_recorded_run_does_not_claim_the_chunk_rise(recorded) -> None:
    chunk = by_claim(findings(recorded), "mean rises with chunk size")
    assert chunk.verdict == NOT_REPRODUCED
    assert "round trip" in chunk.reason


def _scaled(records: list[dict[str, Any]], pick, factor: float) -> list[dict[str, Any]]:
    out = copy.deepcopy(records)
    for r in out:
        if pick(r):
            r["mbps"] = float(r["mbps"]) * factor
    return out


def test_flat_transfers_are_not_reproduced(recorded) -> None:
    """As the lab was before the WAN model: every transfer count gets the same rate."""
    flat = copy.deepcopy(recorded)
    for r in flat:
        if r.get("series") == "transfers":
            r["mbps"] = 90.0
    items = findings(flat)
    assert by_claim(items, "DTN upload: mean rises with parallel").verdict == NOT_REPRODUCED
    assert by_claim(items, "chunk size moves throughput less").verdict == NOT_REPRODUCED


def test_uncapped_single_stream_is_not_reproduced(recorded) -> None:
    fast = _scaled(recorded, lambda r: r["tool"] == "iperf3" and r["parallel"] == 1, 15)
    assert by_claim(findings(fast), "one TCP stream").verdict == NOT_REPRODUCED


def test_lane_gain_outside_five_to_seven_is_not_reproduced(recorded) -> None:
    slow = _scaled(recorded, lambda r: r["path"] == "lane", 0.4)
    assert by_claim(findings(slow), "the desktop on a lane").verdict == NOT_REPRODUCED


def test_no_records_gives_not_applicable_everywhere_but_never_a_crash() -> None:
    items = findings([])
    assert items and all(f.verdict == NOT_APPLICABLE for f in items)


def test_rises() -> None:
    assert rises({4: 42.5, 8: 65.1, 16: 107.7, 32: 118.7}, 1.5)  # the paper's DTN, /10
    assert rises({4: 40, 8: 80, 16: 100, 32: 95}, 1.5)  # a ceiling, within noise
    assert not rises({4: 90, 8: 77, 16: 80, 32: 70}, 1.5)  # the lab without a WAN model
    assert not rises({4: 40, 8: 80, 16: 50, 32: 100}, 1.5)  # a fall of over 10% on the way
    assert not rises({4: 40}, 1.5)


def test_results_without_series_are_read_by_their_parameters() -> None:
    old = [
        {
            "placement": "dtn",
            "direction": "upload",
            "path": "default",
            "tool": "rclone",
            "ok": True,
            "mbps": m,
            "parallel": p,
            "chunk_mb": 8,
            "dataset": "split10",
        }
        for p, m in ((4, 40), (8, 80), (16, 100), (32, 110))
    ]
    dtn = by_claim(findings(old), "DTN upload: mean rises with parallel")
    assert dtn.verdict == REPRODUCED and dtn.lab == "4/8/16/32: 400 -> 800 -> 1000 -> 1100"


def test_markdown_has_one_row_per_finding(recorded) -> None:
    items = findings(recorded)
    lines = markdown(items).splitlines()
    assert len(lines) == len(items) + 2
    assert all(line.count("|") == len(fidelity.HEADER) + 1 for line in lines)


def test_report_cli_writes_the_table_and_the_figures(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from viplanes.cli.lab import lab

    result = CliRunner().invoke(lab, ["report", str(FIXTURE), "--against-paper", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "against_paper.md").read_text()
    assert "**reproduced**" in table and "WAN model: 10 Mbit/s per connection" in table
    assert {p.name for p in tmp_path.glob("paper_*.png")} == {
        "paper_table2.png",
        "paper_fig4_chunks.png",
        "paper_fig5_transfers.png",
        "paper_streams.png",
    }


def test_directions_are_compared_on_the_same_runs_both_ways(recorded) -> None:
    """The chunk sweep (uploads only, one connection) must not make uploads look slower."""
    alike = by_claim(findings(recorded), "uploads and downloads alike")
    assert alike.verdict == REPRODUCED
    slow_down = _scaled(recorded, lambda r: r["direction"] == "download", 0.5)
    assert by_claim(findings(slow_down), "uploads and downloads alike").verdict == NOT_REPRODUCED
    assert by_claim(findings(recorded), "download far faster").verdict == NOT_REPRODUCED


def test_ceiling_needs_a_flat_top_or_the_nic() -> None:
    def dtn(curve: dict[int, float]) -> list[dict[str, Any]]:
        return [
            {
                "placement": "dtn",
                "direction": "upload",
                "path": "default",
                "tool": "iperf3",
                "ok": True,
                "mbps": m,
                "parallel": p,
                "series": "streams",
            }
            for p, m in curve.items()
        ]

    def ceiling(curve: dict[int, float]) -> str:
        return by_claim(fidelity.streams_curve(dtn(curve)), "until a ceiling").verdict

    assert ceiling({1: 10, 4: 40, 16: 100, 32: 105}) == REPRODUCED  # flat: the machine's ceiling
    assert ceiling({1: 10, 4: 40, 16: 130, 32: 160}) == REPRODUCED  # at 80% of the NIC
    assert ceiling({1: 10, 4: 40, 16: 60, 32: 100}) == NOT_REPRODUCED  # still climbing, far below
