"""Every package's docstring names each of its modules and subpackages and says what it imports
(issue 43): a newcomer opening ``__init__.py`` sees the whole folder and its place in the layers,
and a module added without a word in its package's docstring fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

# the product's package folders (setup.py maps the top-level ones into ``viplanes``)
ROOTS = ["viplanes", "topologies", "policy", "authz", "controller", "api"]
SKIP = {"migrations", "__pycache__", "versions"}


def packages() -> list[Path]:
    found = []
    for root in ROOTS:
        for init in (REPO / root).rglob("__init__.py"):
            if not SKIP.intersection(init.relative_to(REPO).parts):
                found.append(init.parent)
    return sorted(found)


def unnamed(package: Path, doc: str) -> list[str]:
    """The modules and subpackages of ``package`` its docstring does not name as ````name````."""
    names = [f.stem for f in package.glob("*.py") if f.stem != "__init__"]
    names += [d.name for d in package.iterdir() if (d / "__init__.py").exists() and d.name not in SKIP]
    return sorted(n for n in names if f"``{n}``" not in doc)


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_the_package_docstring_names_its_modules_and_imports(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    missing = unnamed(package, doc)
    assert not missing, f"{package.relative_to(REPO)}/__init__.py does not name: {', '.join(missing)}"
    assert "Imports today:" in doc or "May import:" in doc, f"{package.relative_to(REPO)}: say what it imports"


def test_a_new_module_without_a_word_is_caught(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text('"""Modules: ``a``."""\n')
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert unnamed(tmp_path, "Modules: ``a``.") == ["b"]
