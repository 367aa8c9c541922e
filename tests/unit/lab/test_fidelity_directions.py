"""Seed 000's upload/download findings on the recorded paper run (`docs/results/paper.jsonl`).

That run went through the WAN model with cheaper reads and a write quota; the server's and the
DTN's downloads come out far faster than their uploads, as in the paper's Table 2. Edited copies
show the verdict turn when the asymmetry is taken away.
"""

from __future__ import annotations

import copy

import pytest

from tests.support.paths import REPO
from viplanes.lab.fidelity import NOT_REPRODUCED, REPRODUCED, Finding, Record, directions, transfer_runs
from viplanes.lab.report import load_results


@pytest.fixture(scope="module")
def recorded() -> list[Record]:
    records, _ = load_results(REPO / "docs" / "results" / "paper.jsonl")
    return records


def by_claim(items: list[Finding], words: str) -> Finding:
    (found,) = [f for f in items if words in f.claim]
    return found


def test_server_and_dtn_download_far_faster_on_the_recorded_run(recorded: list[Record]) -> None:
    found = by_claim(directions(recorded), "download far faster")
    assert found.verdict == REPRODUCED, found
    assert "write quota" in found.reason


def test_uploads_as_fast_as_downloads_turn_the_verdict(recorded: list[Record]) -> None:
    """The model without its asymmetry: every upload as fast as the same download."""
    edited = copy.deepcopy(recorded)
    down = {(r["placement"], r["parallel"]): r["mbps"] for r in transfer_runs(edited) if r["direction"] == "download"}
    for r in transfer_runs(edited):
        if r["direction"] == "upload":
            r["mbps"] = down[r["placement"], r["parallel"]]
    found = by_claim(directions(edited), "download far faster")
    assert found.verdict == NOT_REPRODUCED, found
