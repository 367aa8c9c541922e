"""The lane manager's sibling modules (reads, extension, refusals) stay off the write path.

The attack: a later change makes a "read" helper write lane state by importing a writer, so
the manager is no longer the only writer. import-linter's one-writer contract must break on it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "setup.py").is_file())
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
HELPERS = ("reads", "extension", "refusals")
WRITERS = (
    "from viplanes.lanes.manager import LaneManager",
    "from viplanes.lanes.activation import LaneActivation",
    "from viplanes.store.lanesql.postgres import insert_at_commit",
    "from viplanes.store.records import audit",
)


def _package(tmp: Path) -> Path:
    """The package as installed (component folders mapped in), as scripts/lint-imports builds it."""
    pkg = tmp / "viplanes"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.yaml")
    shutil.copytree(ROOT / "viplanes", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "migrations"))
    for component in ("topologies", "policy", "authz", "controller", "api"):
        shutil.copytree(ROOT / component, pkg / component, ignore=ignore)
    return pkg


def _lint(tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, str(ROOT / ".importlinter"), "--no-cache", "--contract", "one-writer"],
        cwd=tmp,
        env={"PYTHONPATH": str(tmp), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


def test_the_contract_holds_today(tmp_path: Path) -> None:
    _package(tmp_path)
    run = _lint(tmp_path)
    assert run.returncode == 0 and "1 kept, 0 broken" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("helper", "writer"), [(h, w) for h in HELPERS for w in WRITERS[:1]] + [("reads", w) for w in WRITERS[1:]]
)
def test_a_helper_that_imports_a_writer_breaks_it(tmp_path: Path, helper: str, writer: str) -> None:
    pkg = _package(tmp_path)
    module = pkg / "lanes" / f"{helper}.py"
    module.write_text(module.read_text() + f"\n{writer}  # planted\n")
    run = _lint(tmp_path)
    assert run.returncode != 0, run.stdout
    assert "One writer of lane state" in run.stdout and "BROKEN" in run.stdout, run.stdout
