"""Seed 002 read off the ``objects`` series (large objects, 4 and 10 processes) when a run has it.

Made-up records: the DTN's 1 MiB-file transfers sweep stays far under the NIC (per-request
costs), the large objects rise toward it. The verdict follows the objects series, falls back to
the transfers sweep in older results, and turns when the objects series is flat.
"""

from __future__ import annotations

from typing import Any

from viplanes.lab.fidelity import NOT_REPRODUCED, REPRODUCED
from viplanes.lab.fidelity.seeds import concurrency_finding


def rec(series: str, parallel: int, mbps: float, files: int) -> dict[str, Any]:
    return {
        "ok": True,
        "tool": "rclone",
        "placement": "dtn",
        "path": "default",
        "series": series,
        "direction": "download",
        "parallel": parallel,
        "mbps": mbps,
        "seconds": 10.0,
        "dataset": "split50" if series == "transfers" else "split10",
        "dataset_files": files,
        "dataset_bytes": 96 * 2**20 if series == "objects" else 48 * 2**20,
    }


SMALL_FILES = [rec("transfers", p, m, 50) for p, m in ((4, 30), (8, 50), (16, 60), (32, 58))]


def test_large_objects_decide_when_the_run_has_them() -> None:
    found = concurrency_finding(SMALL_FILES + [rec("objects", 4, 44, 10), rec("objects", 10, 124, 10)])
    assert found.verdict == REPRODUCED, found
    assert found.lab.startswith("DTN download of 9.6 MiB objects, processes 4: 440, 10: 1240")
    assert "large objects" in found.reason


def test_older_results_fall_back_to_the_transfers_sweep() -> None:
    found = concurrency_finding(SMALL_FILES)
    assert found.verdict == NOT_REPRODUCED and "1 MiB files" in found.reason
    assert found.lab.startswith("DTN download, transfers 4: 300")


def test_flat_large_objects_are_not_a_rise() -> None:
    found = concurrency_finding(SMALL_FILES + [rec("objects", 4, 110, 10), rec("objects", 10, 120, 10)])
    assert found.verdict == NOT_REPRODUCED, found
