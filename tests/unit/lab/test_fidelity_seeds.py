"""Verdicts for seeds 001-003 and the v6 row, on made-up records that each flip one verdict.

Every finding gets a row, with data or with the reason it has none.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.paths import UNIT_FIXTURES
from viplanes.lab import fidelity
from viplanes.lab.fidelity import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, Finding
from viplanes.lab.fidelity import seeds as fidelity_seeds


def rec(series: str, direction: str, parallel: int, mbps: float, seconds: float, **kw: Any) -> dict[str, Any]:
    base = {
        "ok": True,
        "tool": "rclone",
        "placement": "dtn",
        "path": "default",
        "series": series,
        "direction": direction,
        "parallel": parallel,
        "mbps": mbps,
        "seconds": seconds,
        "x_files": 50 if series == "transfers" else 1,
        "dataset": "split50" if series == "transfers" else "one",
    }
    return base | kw


def by_claim(items: list[Finding], words: str) -> Finding:
    found = [f for f in items if words in f.claim]
    assert len(found) == 1, [f.claim for f in items]
    return found[0]


def queued() -> list[dict[str, Any]]:
    """As the lab with the storage queue: per-file time grows with connections, downloads fill the NIC."""
    out = [rec("transfers", "upload", p, m, s) for p, m, s in ((4, 14, 28.0), (8, 25, 16.0), (32, 60, 7.0))]
    out += [rec("transfers", "download", p, m, 10.0) for p, m in ((4, 20), (8, 40), (16, 80), (32, 150))]
    out += [rec("chunks", "upload", 4, m, 20.0, chunk_mb=c) for c, m in ((5, 5.9), (8, 6.2), (16, 6.4), (32, 6.7))]
    return out


def test_every_seed_has_a_row() -> None:
    items = fidelity_seeds.findings([])
    assert {f.source.split()[0] for f in items} == {"001", "002", "003", "lab"}
    assert all(f.verdict == NOT_APPLICABLE and f.reason for f in items)


def test_storage_queue_and_bigger_requests_reproduce_seed_001() -> None:
    items = fidelity_seeds.findings(queued())
    users = by_claim(items, "concurrent users")
    # 4 connections: 28 s x 4 / 50 files = 2.24 s a file; 32: 7 x 32 / 50 = 4.48 s
    assert users.verdict == REPRODUCED and "2.0x" in users.reason, users
    assert by_claim(items, "largest possible subset").verdict == REPRODUCED
    assert by_claim(items, "until the site's link is full").verdict == REPRODUCED


def test_without_a_queue_or_per_request_cost_the_verdicts_flip() -> None:
    """The lab before this model: each file costs the same whatever the concurrency, chunks flat."""
    flat = [rec("transfers", "upload", p, 10.0 * p, 50 / p) for p in (4, 8, 32)]
    flat += [rec("chunks", "upload", 4, 10.0, 13.0, chunk_mb=c) for c in (5, 8, 16, 32)]
    flat += [rec("transfers", "download", p, 30.0, 10.0) for p in (4, 32)]  # stuck far below the NIC
    items = fidelity_seeds.findings(flat)
    assert by_claim(items, "concurrent users").verdict == NOT_REPRODUCED
    assert by_claim(items, "largest possible subset").verdict == NOT_REPRODUCED
    link = by_claim(items, "until the site's link is full")
    assert link.verdict == NOT_REPRODUCED and "under half the NIC" in link.reason


def test_asymmetric_caps_reproduce_faster_downloads_and_symmetric_ones_do_not() -> None:
    def both(up: float, down: float) -> list[dict[str, Any]]:
        out = []
        for placement in ("server", "dtn"):
            path = "lane" if placement == "server" else "default"
            for p in (4, 32):
                out.append(rec("transfers", "upload", p, up * p, 10.0, placement=placement, path=path))
                out.append(rec("transfers", "download", p, down * p, 10.0, placement=placement, path=path))
        return out

    claim = "download far faster than they upload"
    assert by_claim(fidelity.directions(both(6, 16)), claim).verdict == REPRODUCED
    symmetric = by_claim(fidelity.directions(both(10, 10)), claim)
    assert symmetric.verdict == NOT_REPRODUCED and "symmetric" in symmetric.reason


def test_wan_note_names_the_round_trip_and_caps() -> None:
    wan = {"up_mbps": 6, "down_mbps": 16, "rtt_ms": 300, "request_ms": 500, "storage_workers": 12}
    note = fidelity_seeds.wan_note([{"wan": wan, "wan_mbps": 10}, {"wan_mbps": 10}])
    assert "6 Mbit/s up / 16 down" in note and "rtt 300 ms" in note and "10 Mbit/s per connection" in note


RTT_FIXTURE = UNIT_FIXTURES / "lab" / "paper_results_rtt.jsonl"


def test_recorded_run_with_the_round_trip_reproduces_the_chunk_rise_and_seed_001() -> None:
    """A real `lab run --paper` with campus.yaml's round trip, caps and storage queue (load 8-19)."""
    records = [json.loads(line) for line in RTT_FIXTURE.read_text().splitlines() if line.strip()]
    items = fidelity.findings(records) + fidelity_seeds.findings(records)
    chunk = by_claim(items, "mean rises with chunk size")
    assert chunk.verdict == REPRODUCED and "round trip" in chunk.reason, chunk
    assert by_claim(items, "chunk size moves throughput less").verdict == REPRODUCED
    assert by_claim(items, "concurrent users").verdict == REPRODUCED
    assert by_claim(items, "largest possible subset").verdict == REPRODUCED
    # the DTN at 4 transfers, where neither NIC nor machine binds: downloads well ahead of uploads
    dtn4 = {
        r["direction"]: r["mbps"]
        for r in records
        if r.get("series") == "transfers" and r["placement"] == "dtn" and r["parallel"] == 4
    }
    assert dtn4["download"] >= 1.5 * dtn4["upload"], dtn4
    assert len({f.claim for f in items}) == len(items)  # one row per finding
