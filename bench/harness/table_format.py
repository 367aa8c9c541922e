"""The peers benchmark's comparison as Markdown table rows (pure: unit-tested)."""

from __future__ import annotations

from typing import Any

from bench.harness.report import format_number as f
from bench.harness.stats import ratio


def markdown_rows(
    systems: dict[str, dict[str, Any]],
    floor: dict[str, float],
    floor_release: dict[str, float],
    floor_label: str = "floor (bench.harness.floor)",
    floor_clock: tuple[str, str] = ("send -> barriers", "send -> barriers"),
    other_floors: tuple[tuple[str, str, dict[str, float] | None], ...] = (),
) -> list[str]:
    """The comparison as Markdown rows: p50/p95/p99 per system, ratios to ours and to the floor.

    ``floor``/``floor_release`` are the floor the ratios use (labelled ``floor_label``, clocks
    ``floor_clock`` for activation and release); ``other_floors`` (label, what, summary) are
    printed below with their p50 relative to that floor, so a change of floor stays visible."""
    ours = systems.get("viplanes API (sqlite)", {})
    rows = [
        "| system | what | p50 ms | p95 ms | p99 ms | p50 / ours | p50 / floor |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]

    def row(
        name: str, what: str, s: dict[str, float] | None, ref: dict[str, float] | None, fl: dict[str, float]
    ) -> None:
        if not s:
            return
        rows.append(
            f"| {name} | {what} | {f(s['p50_ms'])} | {f(s['p95_ms'])} | {f(s['p99_ms'])} | "
            f"{f(ratio(s['p50_ms'], ref['p50_ms'])) if ref else '-'} | "
            f"{f(ratio(s['p50_ms'], fl['p50_ms']))} |"
        )

    for name, s in systems.items():
        if name.startswith("viplanes"):
            row(name, "activation: POST -> 201", s.get("answer"), ours.get("activation"), floor)
        row(name, "activation: request -> visible", s.get("activation"), ours.get("activation"), floor)
    for name, s in systems.items():
        row(name, "release: request -> gone", s.get("release"), ours.get("release"), floor_release)
    rows.append(
        f"| {floor_label} | activation: {floor_clock[0]} | {f(floor['p50_ms'])} | "
        f"{f(floor['p95_ms'])} | {f(floor['p99_ms'])} | - | 1 |"
    )
    rows.append(
        f"| {floor_label} | release: {floor_clock[1]} | {f(floor_release['p50_ms'])} | "
        f"{f(floor_release['p95_ms'])} | {f(floor_release['p99_ms'])} | - | 1 |"
    )
    for label, what, s in other_floors:
        if s:
            ref = floor_release if what.startswith("release") else floor
            rows.append(
                f"| {label} | {what} | {f(s['p50_ms'])} | {f(s['p95_ms'])} | "
                f"{f(s['p99_ms'])} | - | {f(ratio(s['p50_ms'], ref['p50_ms']))} |"
            )
    return rows
