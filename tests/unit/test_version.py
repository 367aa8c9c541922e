"""The version comes from one place, viplanes/__init__.py: setup.py builds the wheel with it,
`viplanes --version` prints it, and CHANGELOG.md has its release section (or the version is
still unreleased). Before, setup.py and __init__ each held "0.1.0" and could drift apart."""

from __future__ import annotations

import re
import subprocess
import sys

from click.testing import CliRunner

import viplanes
from tests.support.paths import REPO
from viplanes.cli.main import main


def test_setup_py_reads_the_package_version() -> None:
    text = (REPO / "setup.py").read_text()
    assert not re.search(r"version=\"\d", text), "setup.py must not hold a version literal"
    out = subprocess.run(
        [sys.executable, "setup.py", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == viplanes.__version__, out.stderr


def test_the_cli_prints_it() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"viplanes, version {viplanes.__version__}"


def test_the_changelog_knows_it() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases[0] == ("Unreleased", ""), "Keep a Changelog: [Unreleased] first"
    assert (viplanes.__version__, releases[1][1]) in releases[1:], "the current version has a dated section"
