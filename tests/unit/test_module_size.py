"""Every product module stays under the ~400-line rule (docs/architecture.md, "Subpackages": "a
module holds one concern and stays at 400 lines or under").

A module past it is split along its seams (the lab's `fidelity.py` and `experiments.py` were, at
452 and 404 lines); this test says so when one grows past it again, with the biggest first, rather
than leaving it to a reviewer to count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "setup.py").is_file())
MAX_LINES = 400


def _product_folders() -> list[Path]:
    """viplanes/, the component folders setup.py maps into it (COMPONENTS) and mininet/."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COMPONENTS" for t in node.targets):
            components = ast.literal_eval(node.value).values()
            return [ROOT / "viplanes", ROOT / "mininet", *(ROOT / c for c in components)]
    raise AssertionError("setup.py has no COMPONENTS")


def _sizes() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for folder in _product_folders()
        for path in folder.rglob("*.py")
    }


def test_the_sizes_cover_the_product() -> None:
    sizes = _sizes()
    for module in ("viplanes/lanes/manager.py", "controller/compile/lane.py", "api/lanes.py", "mininet/campus.py"):
        assert module in sizes, module
    assert len(sizes) > 200, len(sizes)


def test_no_product_module_is_over_400_lines() -> None:
    over = sorted(((n, m) for m, n in _sizes().items() if n > MAX_LINES), reverse=True)
    assert not over, "split along its seams: " + ", ".join(f"{m} ({n} lines)" for n, m in over)
