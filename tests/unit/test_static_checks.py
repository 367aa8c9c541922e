"""The static checks `make test` runs (ruff, import-linter, mypy) run, cover the product, and fail.

A check that skips a module, or that a config change quietly turns off, still "passes": these
tests pin what the checks cover and show that each exits non-zero on a planted error.
"""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "setup.py").is_file())  # wherever tests move
BIN = Path(sys.executable).parent  # the venv's ruff and mypy (setup.py extras "dev")


def _components() -> set[str]:
    """The folders setup.py maps into the viplanes.* namespace (its COMPONENTS dict)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COMPONENTS" for t in node.targets):
            return set(ast.literal_eval(node.value).values())
    raise AssertionError("setup.py has no COMPONENTS")


def _recipe(target: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_test_runs_every_static_check_before_pytest() -> None:
    recipe = _recipe("test")
    checks = ["scripts/lint", "scripts/lint-imports", "scripts/typecheck", "scripts/check-units"]
    assert recipe[: len(checks)] == checks, recipe
    assert all("PYTEST" in line for line in recipe[len(checks) :]), recipe
    for script in checks:
        assert (ROOT / script).stat().st_mode & 0o111, f"{script} is not executable"


def test_mypy_checks_every_product_module_with_no_skips() -> None:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "mypy.ini")
    main = ini["mypy"]
    # the whole package (scripts/typecheck assembles it with the component folders) and mininet/
    assert [f.strip() for f in main["files"].split(",")] == ["viplanes", "mininet_scripts"]
    for option in ("disallow_untyped_defs", "check_untyped_defs", "warn_unused_ignores"):
        assert main.getboolean(option), option
    assert not {"exclude", "ignore_errors", "disable_error_code", "ignore_missing_imports"} & set(main)
    for section in ini.sections():
        if section == "mypy":
            continue
        # per-module sections only name third-party packages without types, and only ignore them
        module = section.removeprefix("mypy-")
        assert module.split(".")[0] not in {"viplanes", "mininet_scripts", "tests", *_components()}, section
        assert dict(ini[section]) == {"ignore_missing_imports": "True"}, section
    script = (ROOT / "scripts" / "typecheck").read_text()
    linked = re.search(r"for dir in ([a-z ]+); do", script)
    assert linked is not None and set(linked.group(1).split()) == _components()
    assert 'ln -s "$ROOT/mininet" "$TREE/mininet_scripts"' in script


def test_ruff_fails_on_a_planted_error(tmp_path: Path) -> None:
    unused = tmp_path / "unused.py"
    unused.write_text("import os\n")
    lint = subprocess.run(
        [BIN / "ruff", "check", "--config", ROOT / "ruff.toml", "--no-cache", unused], capture_output=True, text=True
    )
    assert lint.returncode == 1 and "F401" in lint.stdout, lint
    unformatted = tmp_path / "unformatted.py"
    unformatted.write_text("x = [1,2]\n")
    fmt = subprocess.run(
        [BIN / "ruff", "format", "--check", "--config", ROOT / "ruff.toml", "--no-cache", unformatted],
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 1, fmt


def test_mypy_fails_on_a_planted_error(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def planted(x):\n    return x\n\n\ndef wrong() -> int:\n    return 'text'\n")
    run = subprocess.run(
        [BIN / "mypy", "--config-file", ROOT / "mypy.ini", "--cache-dir", "/dev/null", planted.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run
    assert "[no-untyped-def]" in run.stdout and "[return-value]" in run.stdout, run.stdout
