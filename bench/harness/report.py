"""Results of one benchmark as data, target checks, the JSON file and the printed table.

A benchmark returns a :class:`Result`; ``run_all`` writes it to ``bench/results/<name>.json`` and
prints every result as one table. Formatting is pure so it can be unit-tested.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


@dataclass(frozen=True)
class Target:
    """A goal from issue 6, e.g. ``Target("<=", 10.0)`` for "p50 <= 10 ms"."""

    op: Literal["<=", ">="]
    value: float

    def met(self, measured: float | None) -> bool | None:
        if measured is None:
            return None
        return measured <= self.value if self.op == "<=" else measured >= self.value

    def __str__(self) -> str:
        return f"{self.op} {format_number(self.value)}"


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | None
    unit: str
    target: Target | None = None
    note: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value)


@dataclass
class Result:
    """One benchmark run: headline metrics for the table, everything else in ``details``."""

    name: str
    metrics: list[Metric] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def add(self, name: str, value: float | None, unit: str, target: Target | None = None, note: str = "") -> None:
        self.metrics.append(Metric(name, value, unit, target, note))

    def to_json(self, argv: list[str] | None = None) -> dict[str, Any]:
        return {
            "name": self.name,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine(),
            "command": " ".join(argv) if argv else None,
            "error": self.error,
            "metrics": [
                {**asdict(m), "target": str(m.target) if m.target else None, "met": m.met} for m in self.metrics
            ],
            "details": self.details,
        }


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "loadavg": os.getloadavg(),
    }


def format_number(value: float | None) -> str:
    """Three significant-ish digits: 0.0123 -> '0.0123', 12.345 -> '12.3', 12345 -> '12,345'."""
    if value is None:
        return "-"
    if value != value:  # NaN
        return "nan"
    mag = abs(value)
    if mag >= 1000:
        return f"{value:,.0f}"
    if mag >= 100:
        return f"{value:.0f}"
    if mag >= 10:
        return f"{value:.1f}"
    if mag >= 1:
        return f"{value:.2f}"
    if mag == 0:
        return "0"
    return f"{value:.3g}"


def verdict(met: bool | None) -> str:
    return {True: "ok", False: "MISSED", None: ""}[met]


def table_rows(results: Iterable[Result]) -> list[tuple[str, str, str, str, str]]:
    """(benchmark, metric, value+unit, target, verdict) for every metric; one row per error."""
    rows: list[tuple[str, str, str, str, str]] = []
    for res in results:
        if res.error:
            rows.append((res.name, "error", res.error.splitlines()[0][:80], "", "FAILED"))
        for m in res.metrics:
            value = format_number(m.value) + (f" {m.unit}" if m.unit and m.value is not None else "")
            target = f"{m.target} {m.unit}".strip() if m.target else ""
            rows.append((res.name, m.name + (f" ({m.note})" if m.note else ""), value, target, verdict(m.met)))
    return rows


def print_table(results: list[Result]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="VIP Lanes benchmarks")
    for col, justify in (
        ("benchmark", "left"),
        ("metric", "left"),
        ("value", "right"),
        ("target", "right"),
        ("", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    last = None
    for row in table_rows(results):
        if last is not None and row[0] != last:
            table.add_section()
        last = row[0]
        style = "red" if row[4] in ("MISSED", "FAILED") else None
        table.add_row(*row, style=style)
    Console().print(table)


def write_json(result: Result, argv: list[str] | None = None, directory: Path = RESULTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.name}.json"
    path.write_text(json.dumps(result.to_json(argv), indent=2, default=str) + "\n")
    return path


def markdown_rows(saved: list[dict[str, Any]]) -> list[str]:
    """Markdown table (| benchmark | metric | measured | target |) from saved result JSON."""
    lines = ["| benchmark | metric | measured | target |", "|---|---|---|---|"]
    for res in saved:
        if res.get("error"):
            lines.append(f"| {res['name']} | error | {res['error'].splitlines()[0][:80]} | |")
        for m in res.get("metrics", []):
            value = format_number(m["value"]) + (f" {m['unit']}" if m["unit"] and m["value"] is not None else "")
            mark = {True: " ✔", False: " ✘", None: ""}[m.get("met")]
            target = f"{m['target']} {m['unit']}".strip() + mark if m.get("target") else ""
            name = m["name"] + (f" ({m['note']})" if m.get("note") else "")
            lines.append(f"| {res['name']} | {name} | {value} | {target} |")
    return lines


def load_saved(directory: Path = RESULTS_DIR, names: Iterable[str] = ()) -> list[dict[str, Any]]:
    wanted = list(names) or [p.stem for p in sorted(directory.glob("*.json"))]
    return [json.loads((directory / f"{n}.json").read_text()) for n in wanted if (directory / f"{n}.json").exists()]


if __name__ == "__main__":  # python -m bench.harness.report: the saved results as a Markdown table
    import sys

    saved = load_saved(names=sys.argv[1:] or ("activation", "churn", "scale", "policy"))
    for res in saved:
        print(
            f"<!-- {res['name']}: {res['when']}, load {', '.join(f'{x:.1f}' for x in res['machine'].get('loadavg', []))} -->"
        )
    print("\n".join(markdown_rows(saved)))
