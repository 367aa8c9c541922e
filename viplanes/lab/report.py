"""The paper's Table 2 for the lab, and its figures: from the JSON lines `viplanes lab run` wrote.

Aggregation is pure (records in, rows out); rendering writes a rich table, Markdown, CSV and PNGs.
Only successful runs count; failed ones are reported by number.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

ORDER = {"desktop": 0, "server": 1, "dtn": 2}
DIRS = {"upload": "up", "download": "down"}


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    std: float
    max: float


@dataclass(frozen=True)
class Row:
    """One line of Table 2: a placement and direction, campus default path vs VIP lane."""

    tool: str
    placement: str
    direction: str
    default: Stats | None
    lane: Stats | None

    @property
    def label(self) -> str:
        return f"{self.placement}-{DIRS.get(self.direction, self.direction)}"

    @property
    def ratio(self) -> float | None:
        if self.default and self.lane and self.default.mean > 0:
            return self.lane.mean / self.default.mean
        return None


def load_results(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Records of a results file, and how many lines could not be read."""
    records, bad = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(rec, dict) and {"placement", "direction", "path", "tool", "mbps"} <= set(rec):
            records.append(rec)
        else:
            bad += 1
    return records, bad


def stats(values: Sequence[float]) -> Stats | None:
    if not values:
        return None
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Stats(len(values), statistics.fmean(values), std, max(values))


def table2(records: Iterable[dict[str, Any]]) -> list[Row]:
    """Mean, standard deviation and maximum Mbit/s per tool, placement and direction."""
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.get("ok"):
            groups[(r["tool"], r["placement"], r["direction"], r["path"])].append(float(r["mbps"]))
    keys = sorted({k[:3] for k in groups}, key=lambda k: (k[0], ORDER.get(k[1], 9), k[1], k[2] != "upload"))
    return [
        Row(tool, pl, d, stats(groups.get((tool, pl, d, "default"), [])), stats(groups.get((tool, pl, d, "lane"), [])))
        for tool, pl, d in keys
    ]


def _cells(s: Stats | None) -> list[str]:
    return [f"{s.mean:.1f}", f"{s.std:.1f}", f"{s.max:.1f}", str(s.n)] if s else ["-"] * 4


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    return [[r.tool, r.label, *_cells(r.default), *_cells(r.lane), f"{r.ratio:.1f}x" if r.ratio else "-"] for r in rows]


HEADER = ["tool", "location-dir", "default mean", "sd", "max", "n", "lane mean", "sd", "max", "n", "ratio"]


def markdown(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(rows)]
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "tool",
                "placement",
                "direction",
                "default_mean",
                "default_std",
                "default_max",
                "default_n",
                "lane_mean",
                "lane_std",
                "lane_max",
                "lane_n",
                "ratio",
            ]
        )
        for r in rows:
            d, lane = r.default, r.lane
            w.writerow(
                [
                    r.tool,
                    r.placement,
                    r.direction,
                    *(_num(d) if d else [""] * 4),
                    *(_num(lane) if lane else [""] * 4),
                    f"{r.ratio:.3f}" if r.ratio else "",
                ]
            )


def _num(s: Stats) -> list[str]:
    return [f"{s.mean:.3f}", f"{s.std:.3f}", f"{s.max:.3f}", str(s.n)]


def rich_table(rows: Sequence[Row], title: str = "Table 2 (lab): throughput by location, Mbit/s") -> Table:
    from rich.table import Table

    table = Table(title=title, padding=(0, 1))
    for i, name in enumerate(HEADER):
        table.add_column(
            name, justify="left" if i < 2 else "right", no_wrap=True, style="cyan" if 6 <= i <= 9 else None
        )
    for cells in table_rows(rows):
        table.add_row(*cells)
    return table


def series(
    records: Iterable[dict[str, Any]], tool: str, key: str, direction: str | None = None
) -> dict[str, dict[int, list[float]]]:
    """mbps by (placement/path) label and by a numeric parameter (parallel or chunk_mb)."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if (
            r.get("ok")
            and r["tool"] == tool
            and r.get(key) is not None
            and (direction is None or r["direction"] == direction)
        ):
            out[f"{r['placement']} {r['path']}"][int(r[key])].append(float(r["mbps"]))
    return out


def write_report(records: list[dict[str, Any]], out_dir: Path) -> dict[str, Path]:
    """Table 2 as Markdown and CSV, and the three figures; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = table2(records)
    files = {"markdown": out_dir / "table2.md", "csv": out_dir / "table2.csv"}
    files["markdown"].write_text(markdown(rows))
    write_csv(rows, files["csv"])
    from .plots import by_chunk, by_parallel, by_placement

    for name, fn in (("by_placement", by_placement), ("by_parallel", by_parallel), ("by_chunk", by_chunk)):
        path = out_dir / f"{name}.png"
        if fn(records, rows, path):
            files[name] = path
    return files
