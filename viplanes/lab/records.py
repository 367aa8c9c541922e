"""The lab's result records as the findings read them: which runs count, and per-value means.

Pure: the JSON lines of `viplanes lab run` in. Runs of `lab run --paper` carry a ``series``
(streams, transfers, chunks, baseline); older results without one are read by their parameters
instead (`in_series`). Shared by the fidelity modules and the paired figures (`paper/plots.py`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from itertools import pairwise
from typing import Any

from . import paper as P

LANE_PLACEMENTS = ("desktop", "server")  # the DTN is measured on its middlebox-free default path
Record = dict[str, Any]


def ok_runs(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.get("ok")]


def on_best_path(r: Record) -> bool:
    """The placement's best path: the lane, or the DTN's own default path."""
    return r["path"] == "lane" or r["placement"] not in LANE_PLACEMENTS


def in_series(records: list[Record], name: str, fallback: Callable[[Record], bool]) -> list[Record]:
    """Runs of one `--paper` sweep; for results without series, the runs ``fallback`` picks."""
    if any(r.get("series") for r in records):
        return [r for r in records if r.get("series") == name]
    return [r for r in records if fallback(r)]


def by_value(
    records: Iterable[Record], key: str, agg: Callable[[list[float]], float] = statistics.fmean
) -> dict[int, float]:
    """Lab Mbit/s x SCALE, aggregated per value of ``key`` (parallel, chunk_mb)."""
    groups: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r.get(key) is not None:
            groups[int(r[key])].append(float(r["mbps"]) * P.SCALE)
    return {k: agg(v) for k, v in sorted(groups.items())}


def rises(series: Mapping[int, float], min_gain: float, slack: float = 0.9) -> bool:
    """Throughput grows from the first value to the last by ``min_gain`` and no step falls by
    more than noise (``slack``): a rise, possibly to a ceiling."""
    ys = [series[k] for k in sorted(series)]
    if len(ys) < 2 or ys[0] <= 0:
        return False
    return ys[-1] >= min_gain * ys[0] and all(b >= slack * a for a, b in pairwise(ys))


def transfer_runs(records: list[Record]) -> list[Record]:
    rc = [r for r in ok_runs(records) if r["tool"] == "rclone" and on_best_path(r)]
    return in_series(rc, "transfers", lambda r: r.get("dataset") != "one")


def chunk_runs(records: list[Record]) -> list[Record]:
    rc = [r for r in ok_runs(records) if r["tool"] == "rclone" and on_best_path(r) and r["direction"] == "upload"]
    return in_series(rc, "chunks", lambda r: r.get("chunk_mb") is not None)
