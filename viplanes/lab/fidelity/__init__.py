"""The lab held against the paper: one `Finding` per claim of seed 000 section 4 and seed 004.

Pure: lab records (the JSON lines of `viplanes lab run`) in, findings out. Each finding gives
the paper's number, the lab's number scaled back to real rates (x10), and a verdict with its
reason. The claims live by concern: ``table2`` (the lane's gain, Table 2, the two directions)
and ``curves`` (Figures 4 and 5, seed 004's streams), on the record selection of `records.py` and
the `Finding` of `finding.py`; this module puts them in the paper's order and keeps the names its
callers import from here. Seeds 001-003 and the v6 row are ``seeds``' (with ``tools``, seed 003's
file tools).

Modules: ``curves``, ``seeds``, ``table2``, ``tools``.

Imports today: the lab's ``paper``, ``finding``, ``records`` and ``v6series``. Never
(.importlinter): click, tests, cli.
"""

from __future__ import annotations

from ..finding import HEADER, NO_DATA, NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, Finding, markdown
from ..records import Record, by_value, chunk_runs, in_series, ok_runs, on_best_path, rises, transfer_runs
from .curves import parallel_and_chunks, streams_curve
from .table2 import directions, lane_gain, table2_rows

__all__ = [
    "HEADER",
    "NOT_APPLICABLE",
    "NOT_REPRODUCED",
    "NO_DATA",
    "REPRODUCED",
    "Finding",
    "Record",
    "by_value",
    "chunk_runs",
    "directions",
    "findings",
    "in_series",
    "lane_gain",
    "markdown",
    "ok_runs",
    "on_best_path",
    "parallel_and_chunks",
    "rises",
    "streams_curve",
    "table2_rows",
    "transfer_runs",
]


def findings(records: list[Record]) -> list[Finding]:
    """Every finding, in the paper's order."""
    return (
        lane_gain(records)
        + table2_rows(records)
        + directions(records)
        + parallel_and_chunks(records)
        + streams_curve(records)
    )
