"""PNG figures of a lab run (matplotlib, Agg: no display needed). Each returns False if empty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .report import Row, series

COLORS = {"default": "#c0504d", "lane": "#2e75b6"}
PLACEMENT_COLORS = {"desktop": "#1f77b4", "server": "#9467bd", "dtn": "#2ca02c"}


def by_placement(records: list[dict[str, Any]], rows: Sequence[Row], path: Path) -> bool:
    """Bars of mean Mbit/s (error bar: std dev) per location-direction, default vs lane."""
    tools = sorted({r.tool for r in rows})
    if not tools:
        return False
    fig, axes = plt.subplots(1, len(tools), figsize=(6.5 * len(tools), 4.5), squeeze=False)
    for ax, tool in zip(axes[0], tools, strict=True):
        mine = [r for r in rows if r.tool == tool]
        xs = range(len(mine))
        width = 0.38
        for offset, kind in ((-width / 2, "default"), (width / 2, "lane")):
            st = [getattr(r, kind) for r in mine]
            ax.bar(
                [x + offset for x in xs],
                [s.mean if s else 0 for s in st],
                width,
                yerr=[s.std if s else 0 for s in st],
                capsize=3,
                color=COLORS[kind],
                label="campus default path" if kind == "default" else "VIP lane",
            )
        for x, r in zip(xs, mine, strict=True):
            if r.ratio:
                top = max(s.mean + s.std for s in (r.default, r.lane) if s)
                ax.annotate(f"{r.ratio:.1f}x", (x, top), ha="center", va="bottom", fontsize=9)
        ax.set_xticks(list(xs), [r.label for r in mine], rotation=20)
        ax.set_ylabel("throughput (Mbit/s, lab scale 1:10)")
        ax.set_title(f"{tool}: throughput by location")
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _lines(ax: Any, data: dict[str, dict[int, list[float]]], xlabel: str, title: str) -> None:
    for label in sorted(data):
        xs = sorted(data[label])
        means = [sum(data[label][x]) / len(data[label][x]) for x in xs]
        placement, _, path = label.partition(" ")
        ax.plot(
            xs,
            means,
            "-" if path == "lane" else "--",
            marker="o" if path == "lane" else "s",
            color=PLACEMENT_COLORS.get(placement),
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean throughput (Mbit/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))


def by_parallel(records: list[dict[str, Any]], rows: Sequence[Row], path: Path) -> bool:
    """Mean Mbit/s against iperf3 streams and rclone transfers, per location and path."""
    panels = [(tool, series(records, tool, "parallel")) for tool in ("iperf3", "rclone")]
    panels = [(t, d) for t, d in panels if d]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 4.5), squeeze=False)
    for ax, (tool, data) in zip(axes[0], panels, strict=True):
        what = "parallel streams (-P)" if tool == "iperf3" else "parallel transfers (--transfers)"
        _lines(ax, data, what, f"{tool}: throughput by {what.split(' (')[0]}")
        ax.set_xticks(sorted({x for d in data.values() for x in d}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def by_chunk(records: list[dict[str, Any]], rows: Sequence[Row], path: Path) -> bool:
    """rclone upload Mbit/s against --s3-chunk-size (the paper's Figure 4)."""
    data = series(records, "rclone", "chunk_mb", direction="upload")
    if not data:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    _lines(ax, data, "chunk size (MiB, --s3-chunk-size)", "rclone upload: throughput by chunk size")
    ax.set_xticks(sorted({x for d in data.values() for x in d}))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
