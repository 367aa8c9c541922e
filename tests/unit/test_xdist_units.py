"""The integration suite's two workers keep each module whole and in order, the Keycloak modules
together, and start the longest unit first (tests/support/workers.py): the order's logic alone,
then a small suite on two real workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.workers import KEYCLOAK_GROUP, PER_TEST_S, UNIT_S, keycloak_modules, longest, unit_seconds, work_unit

REPO = Path(__file__).resolve().parents[2]

CONFTEST = '''
import pytest
from pathlib import Path
from tests.support.workers import ModuleScheduling, keycloak_modules

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return ModuleScheduling(config, log, keycloak_modules(Path(__file__).parent), {"test_delta.py": 100.0})
'''

MODULE = '''
import os, time
{uses}
def test_1():
    time.sleep(0.05)
def test_2():
    time.sleep(0.05)
def test_3():
    time.sleep(0.05)
'''


def test_a_module_is_one_unit_and_keycloak_modules_share_one() -> None:
    shared = frozenset({"test_kc_a.py", "test_kc_b.py"})
    assert work_unit("tests/integration/test_lab.py::test_x[a]", shared) == "tests/integration/test_lab.py"
    assert work_unit("tests/integration/test_kc_a.py::test_1", shared) == KEYCLOAK_GROUP
    assert work_unit("tests/integration/test_kc_b.py::T::test_2", shared) == KEYCLOAK_GROUP


def test_the_keycloak_modules_are_found_by_the_fixture_they_use() -> None:
    found = keycloak_modules(REPO / "tests" / "integration")
    assert "test_oidc_keycloak.py" in found and "test_lab_smoke.py" not in found


def test_the_longest_unit_starts_first() -> None:
    known = {KEYCLOAK_GROUP: 300.0, "m/test_image.py": 80.0}
    queue = {"m/test_api.py": [0] * 35, "m/test_image.py": [0], KEYCLOAK_GROUP: [0] * 15, "m/test_a.py": [0] * 2}
    assert longest(queue, known) == KEYCLOAK_GROUP  # not the unit with the most tests (35 x 3 s)
    del queue[KEYCLOAK_GROUP]
    assert longest(queue, known) == "m/test_api.py"  # unknown: 3 s a test, 105 s
    del queue["m/test_api.py"]
    assert longest(queue, known) == "m/test_image.py"  # one test, but 80 s of it
    assert longest({"m/test_b.py": [0], "m/test_c.py": [0]}, known) == "m/test_b.py"  # equals: collection order
    assert unit_seconds("m/test_a.py", 2, known) == 2 * PER_TEST_S


def test_every_unit_timed_is_still_a_module_of_the_suite() -> None:
    """A renamed module would silently lose its place at the front of the queue."""
    missing = [unit for unit in UNIT_S if unit != KEYCLOAK_GROUP and not (REPO / unit).is_file()]
    assert not missing, f"UNIT_S names modules that do not exist: {missing}"


def test_two_workers_run_each_module_whole_and_in_order(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma", "delta"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(uses=""))
    for name in ("kc_a", "kc_b"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(uses="keycloak_server = None"))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2", "--dist", "loadgroup",
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # xdist alone: 2 s, not 15
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED \S*?test_(\w+)\.py::test_(\d)", run.stdout)
    assert len(ran) == 18, run.stdout[-2000:]
    workers: dict[str, set[str]] = {}
    order: dict[str, list[str]] = {}
    for worker, module, n in ran:
        workers.setdefault(module, set()).add(worker)
        order.setdefault(module, []).append(n)
    split = {m: w for m, w in workers.items() if len(w) > 1}
    assert not split, f"modules split across workers: {split}"
    assert all(o == ["1", "2", "3"] for o in order.values()), order
    assert workers["kc_a"] == workers["kc_b"], "the Keycloak modules ran on different workers"
    (first_worker,) = workers["delta"]  # the conftest's timed unit: 100 s against 3 x 3 s
    first = next(module for worker, module, _ in ran if worker == first_worker)
    assert first == "delta", f"{first_worker} started with {first}, not the longest unit (delta)"
