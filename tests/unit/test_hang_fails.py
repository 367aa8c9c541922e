"""A hung integration test fails with a message naming it, within the suite's per-test timeout
(pytest.ini: pytest-timeout), and the run goes on to the next test: never a stuck CI run.

The check runs a child pytest on the repository's own pytest.ini with only the number shrunk to
1 s, over a sleeping integration test and a quick one after it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import REPO

HUNG = '''
import time

import pytest


@pytest.mark.integration
def test_hangs():
    time.sleep(120)


@pytest.mark.integration
def test_after_the_hang():
    pass
'''


def test_the_ini_sets_a_per_test_timeout() -> None:
    ini = (REPO / "pytest.ini").read_text()
    found = re.search(r"^timeout\s*=\s*(\d+)\s*$", ini, re.M)
    assert found, "pytest.ini sets no per-test timeout: a hung test would stall the CI run"
    assert 0 < int(found.group(1)) <= 900, f"per-test timeout {found.group(1)} s: longer than a locked run may take"


def test_a_hung_integration_test_fails_with_its_name(tmp_path: Path) -> None:
    ini = re.sub(r"^timeout\s*=\s*\d+\s*$", "timeout = 1", (REPO / "pytest.ini").read_text(), flags=re.M)
    (tmp_path / "pytest.ini").write_text(ini.replace("testpaths = tests", "testpaths = ."))
    (tmp_path / "test_hung.py").write_text(HUNG)
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "integration", "-p", "no:cacheprovider", "-p", "pytest_timeout"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # pytest-timeout alone: 1 s to start, not 8
    )
    took = time.monotonic() - t0
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "Timeout (>1.0s)" in out and "FAILED test_hung.py::test_hangs" in out, out
    assert "1 failed, 1 passed" in out, out  # the run went on after the hang
    assert took < 60, f"the hung test held the run {took:.0f} s"
