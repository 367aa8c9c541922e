"""The paired figures: written, scaled, labelled without covering bars or legends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Rectangle

from tests.support.paths import UNIT_FIXTURES
from viplanes.lab.paper import plots as paperplots

FIXTURE = UNIT_FIXTURES / "lab" / "paper_results.jsonl"


@pytest.fixture
def kept_open(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Figures stay open after saving so the test can measure where things were drawn."""
    figures: list[Any] = []
    close = plt.close
    monkeypatch.setattr(paperplots.plt, "close", figures.append)
    yield figures
    for fig in figures:
        close(fig)


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("name", list(paperplots.FIGURES))
def test_figures_say_the_scale_and_nothing_covers_data_or_legends(
    name: str, recorded, kept_open, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.png"
    assert paperplots.FIGURES[name](recorded, path)
    assert path.stat().st_size > 10_000
    fig = kept_open[-1]
    assert "lab runs at 1:10" in fig._suptitle.get_text()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = fig.get_axes()
    assert len(axes) == 2 and axes[0].get_ylim() == axes[1].get_ylim()  # the same axes
    legends = [ax.get_legend() for ax in axes if ax.get_legend()]
    for ax in axes:
        plot_area = ax.get_window_extent(renderer)
        for legend in legends:  # legends live below the panels, outside every plot area
            assert not _overlap(legend.get_window_extent(renderer), plot_area)
        bars = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
        for text in ax.texts:  # value labels: above their bar, inside the panel
            box = text.get_window_extent(renderer)
            assert not any(_overlap(box, bar) for bar in bars), text.get_text()
            assert plot_area.y0 <= box.y0 and box.y1 <= plot_area.y1, text.get_text()


def test_nothing_to_plot_writes_nothing(tmp_path: Path) -> None:
    assert paperplots.write_all([], tmp_path) == {}
