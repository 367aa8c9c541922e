"""Every subpackage of ``viplanes`` is the source of at least one import contract (.importlinter),
so a new package cannot slip in unfenced (``viplanes.auto`` was the source of none, issue 43).
``scripts/lint-imports`` checks the contracts themselves."""

from __future__ import annotations

import configparser

from tests.unit.test_module_size import ROOT, _product_folders


def subpackages() -> set[str]:
    """``viplanes.X`` for each package folder under viplanes/ and each mapped component folder."""
    names = {p.parent.name for p in (ROOT / "viplanes").glob("*/__init__.py")}
    names |= {f.name for f in _product_folders() if f.name not in ("viplanes", "mininet")}
    return {f"viplanes.{n}" for n in names}


def contract_sources(text: str) -> set[str]:
    parser = configparser.ConfigParser()
    parser.read_string(text)
    return {
        line.strip()
        for section in parser.sections()
        if section.startswith("importlinter:contract:")
        for line in parser[section].get("source_modules", "").splitlines()
        if line.strip()
    }


def unfenced(packages: set[str], sources: set[str]) -> list[str]:
    return sorted(packages - sources)


def test_every_subpackage_is_the_source_of_a_contract() -> None:
    assert unfenced(subpackages(), contract_sources((ROOT / ".importlinter").read_text())) == []


def test_the_check_finds_an_unfenced_package() -> None:
    text = "[importlinter:contract:a]\nname = a\ntype = forbidden\nsource_modules =\n    viplanes.lanes\n"
    assert unfenced({"viplanes.lanes", "viplanes.auto"}, contract_sources(text)) == ["viplanes.auto"]
    assert {"viplanes.auto", "viplanes.cli", "viplanes.api", "viplanes.controller"} <= subpackages()
