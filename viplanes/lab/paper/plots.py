"""The lab's figures beside the paper's, on the same axes (`lab report --against-paper`).

Each PNG has the paper's numbers in the left panel and the lab's, scaled back x10, in the right,
sharing the y axis. Legends sit below the panels and value labels above the bars with headroom,
so no label covers a bar or a legend. Every figure says the lab scale in its title.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

from .. import paper as P
from ..records import by_value, chunk_runs, ok_runs, on_best_path, transfer_runs

SCALE_NOTE = f"lab numbers x{P.SCALE} (the lab runs at 1:{P.SCALE})"
COLORS = {"desktop": "#1f77b4", "server": "#9467bd", "dtn": "#2ca02c"}
Record = dict[str, Any]


def _pair(title: str, xlabel: str, ylabel: str, logy: bool, source: str) -> tuple[Any, Any, Any]:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    fig.suptitle(f"{title}\n{SCALE_NOTE}", fontsize=11)
    left.set_title(f"paper ({source})", fontsize=10)
    right.set_title(f"lab x{P.SCALE} (WAN model on)", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, which="both")
        if logy:  # plain numbers at 1-2-5 steps: 100, 200, 500, 1000 ...
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
    left.set_ylabel(ylabel)
    return fig, left, right


def _finish(fig: Any, axes: tuple[Any, ...], path: Path) -> None:
    """Legends under each panel (outside the data), then save."""
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(
                handles,
                labels,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.17),
                ncol=min(3, len(labels)),
                fontsize=8,
                frameon=False,
            )
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _log2_x(ax: Any, ticks: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.get_xaxis().set_major_formatter(ScalarFormatter())
    ax.minorticks_off()


def _line(ax: Any, series: Mapping[int, float], label: str, color: str | None, style: str = "-o") -> None:
    if series:
        ax.plot(list(series), list(series.values()), style, color=color, label=label)


def table2(records: list[Record], path: Path) -> bool:
    """Table 2 as bars: mean (error bar: sd) per location-direction, paper | lab x10."""
    rc = [r for r in ok_runs(records) if r["tool"] == "rclone" and on_best_path(r)]
    if not rc:
        return False
    keys = list(P.TABLE2)
    labels = [f"{p}-{'up' if d == 'upload' else 'down'}" for p, d in keys]
    lab = []
    for placement, direction in keys:
        got = [float(r["mbps"]) * P.SCALE for r in rc if r["placement"] == placement and r["direction"] == direction]
        mean = sum(got) / len(got) if got else 0.0
        sd = (sum((x - mean) ** 2 for x in got) / (len(got) - 1)) ** 0.5 if len(got) > 1 else 0.0
        lab.append((mean, sd))
    fig, left, right = _pair(
        "Table 2: throughput by location (rclone; lanes for desktop and server)",
        "",
        "mean Mbit/s (error bar: sd)",
        False,
        "seed 000 Table 2, Google Drive",
    )
    tops = []
    for ax, values, color in ((left, [(m, s) for m, s, _ in P.TABLE2.values()], "#7f7f7f"), (right, lab, "#2e75b6")):
        xs = range(len(values))
        ax.bar(xs, [m for m, _ in values], 0.6, yerr=[s for _, s in values], capsize=3, color=color)
        for x, (m, s) in zip(xs, values, strict=True):
            if m <= 0:
                ax.annotate(
                    "no runs",
                    (x, 0),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="#777777",
                )
                continue
            ax.annotate(
                f"{m:.0f}", (x, m + s), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=8
            )
            tops.append(m + s)
        ax.set_xticks(list(xs), labels, rotation=25, ha="right")
    left.set_ylim(0, max(tops) * 1.15)  # headroom: the value labels stay inside the axes
    _finish(fig, (left, right), path)
    return True


def transfers(records: list[Record], path: Path) -> bool:
    """Figure 5: throughput by rclone --transfers (log scale)."""
    tr = transfer_runs(records)
    if not tr:
        return False
    fig, left, right = _pair(
        "Figure 5: throughput by number of parallel transfers (rclone upload)",
        "parallel transfers (--transfers)",
        "Mbit/s (log scale)",
        True,
        "seed 000 §4.2 text",
    )
    _line(left, P.DTN_BY_TRANSFERS, "DTN mean", COLORS["dtn"])
    _line(left, P.SERVER_MAX_BY_TRANSFERS, "server max", COLORS["server"], "--s")
    up = [r for r in tr if r["direction"] == "upload"]
    for placement in ("desktop", "server", "dtn"):
        mine = [r for r in up if r["placement"] == placement]
        _line(right, by_value(mine, "parallel"), f"{placement} mean", COLORS[placement])
        if placement == "server":
            _line(right, by_value(mine, "parallel", max), "server max", COLORS[placement], "--s")
    for ax in (left, right):
        _log2_x(ax, [4, 8, 16, 32])
    _finish(fig, (left, right), path)
    return True


def chunks(records: list[Record], path: Path) -> bool:
    """Figure 4: upload throughput by chunk size (log scale)."""
    ch = chunk_runs(records)
    if not ch:
        return False
    fig, left, right = _pair(
        "Figure 4: upload throughput by chunk size (rclone)",
        "chunk size (MB; lab MiB, S3's minimum is 5)",
        "Mbit/s (log scale)",
        True,
        "seed 000 §4.2 text",
    )
    _line(left, P.DTN_BY_CHUNK, "DTN mean", COLORS["dtn"])
    for placement in ("desktop", "server", "dtn"):
        _line(
            right,
            by_value([r for r in ch if r["placement"] == placement], "chunk_mb"),
            f"{placement} mean",
            COLORS[placement],
        )
    for ax in (left, right):
        _log2_x(ax, [4, 5, 8, 16, 32])
    _finish(fig, (left, right), path)
    return True


def streams(records: list[Record], path: Path) -> bool:
    """Seed 004 Figure 2: aggregate iperf throughput by parallel streams."""
    ip = [r for r in ok_runs(records) if r["tool"] == "iperf3" and on_best_path(r)]
    ip = [r for r in ip if r.get("series") in (None, "streams")]
    if not ip:
        return False
    fig, left, right = _pair(
        "Seed 004 Figure 2: aggregate throughput by parallel TCP streams",
        "parallel streams (iperf -P)",
        "Mbit/s",
        False,
        "seed 004 Table 1, 1 Gbit/s path",
    )
    _line(left, P.STREAMS_IN, "Edinburgh to HPCx", "#444444")
    _line(left, P.STREAMS_OUT, "HPCx to Edinburgh", "#999999", "--s")
    for placement in ("desktop", "server", "dtn"):
        for direction, style in (("upload", "-o"), ("download", "--s")):
            mine = [r for r in ip if r["placement"] == placement and r["direction"] == direction]
            _line(right, by_value(mine, "parallel"), f"{placement} {direction}", COLORS[placement], style)
    for ax in (left, right):
        ax.set_xlim(0, 33)
    _finish(fig, (left, right), path)
    return True


FIGURES: dict[str, Callable[[list[Record], Path], bool]] = {
    "paper_table2": table2,
    "paper_fig4_chunks": chunks,
    "paper_fig5_transfers": transfers,
    "paper_streams": streams,
}


def write_all(records: list[Record], out_dir: Path) -> dict[str, Path]:
    files = {}
    for name, fn in FIGURES.items():
        path = out_dir / f"{name}.png"
        if fn(records, path):
            files[name] = path
    return files
