"""Fixtures of the lab's report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def no_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab report` writes its Markdown without drawing the figures (matplotlib: over half of a
    report's time), for tests that read only the Markdown; the figures have their own tests
    (test_report, test_paperplots, test_fidelity's report test)."""
    from viplanes.lab import plots
    from viplanes.lab.paper import plots as paperplots

    def no_figure(_records: Any, _rows: Any, _path: Path) -> bool:
        return False

    def none_written(_records: Any, _out_dir: Path) -> dict[str, Path]:
        return {}

    monkeypatch.setattr(paperplots, "write_all", none_written)
    for name in ("by_placement", "by_parallel", "by_chunk"):
        monkeypatch.setattr(plots, name, no_figure)
