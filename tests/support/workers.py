"""How `make test` shares the integration suite between two pytest-xdist workers.

A module's tests run on one worker, in order: many build a lab once per module and later tests
read what earlier ones left (the lane a module requested). Every module that signs in against
Keycloak runs on the same worker, so the session's Keycloak (14 s quiet, minutes under load) starts
once. Labs on both workers stay apart by their run's bridge names (``runtag``) and their session's
conntrack zones (``viplanes.lab.ctzones``).

pytest-xdist's own ``--dist loadgroup`` cannot do this under pytest 9: it marks a group by
rewriting ``item._nodeid``, which pytest 9 no longer reads, so every test became its own unit
(tests split from their module's lab, Keycloak started twice). The scheduler below groups by the
node id alone, which the controller has.

Units start longest first (LPT), so the two workers finish together: handed out in collection order
the 1-test modules that take a minute (the install end-to-end, the container image) came last and
ran while the other worker sat idle. A unit's length is ``UNIT_S`` (from a CI run's slowest steps)
or ``PER_TEST_S`` per test for the rest; a wrong guess costs balance, never a test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

KEYCLOAK_GROUP = "keycloak"

# Seconds a unit takes in CI (`make test` on 2 cores: the 20 slowest steps of runs 47-49, rounded up
# with the module's other tests). Units not named take PER_TEST_S per test.
PER_TEST_S = 3.0
UNIT_S: dict[str, float] = {
    KEYCLOAK_GROUP: 300.0,  # Keycloak's start (~60 s) and four modules signing in against it
    "tests/integration/test_clock_steps_serve.py": 90.0,
    "tests/integration/test_container_image.py": 80.0,
    "tests/integration/test_install_e2e.py": 75.0,
    "tests/integration/test_faults.py": 70.0,
    "tests/integration/test_faults_load.py": 60.0,
    "tests/integration/test_lane_sets_lab.py": 60.0,
    "tests/integration/test_https_soak.py": 50.0,
    "tests/integration/test_postgres_api.py": 45.0,
    "tests/integration/test_lab_wan.py": 40.0,
    "tests/integration/test_lab_filetools.py": 35.0,
    "tests/integration/test_ui_browser.py": 35.0,
    "tests/integration/test_v6series_lab.py": 30.0,
    "tests/integration/test_attack_admission.py": 30.0,
    "tests/integration/test_attack_dataplane.py": 50.0,
    "tests/integration/test_dataplane.py": 45.0,
    "tests/integration/test_conntrack_flood.py": 45.0,
    "tests/integration/test_doctor_lab.py": 40.0,
    "tests/integration/test_lab_smoke.py": 35.0,
    "tests/integration/test_controller_scale.py": 35.0,
    "tests/integration/test_auto_split.py": 35.0,
    "tests/integration/test_graceful_handover.py": 30.0,
    "tests/integration/test_wheel_client.py": 25.0,
}


def keycloak_modules(integration_dir: Path) -> frozenset[str]:
    """Test modules that use the session's Keycloak (``keycloak_server``), by file name."""
    return frozenset(
        p.name for p in integration_dir.glob("test_*.py") if "keycloak_server" in p.read_text(encoding="utf-8")
    )


def work_unit(nodeid: str, shared: frozenset[str]) -> str:
    """The unit a test is scheduled in: its module, or the Keycloak group."""
    module = nodeid.split("::", 1)[0]
    return KEYCLOAK_GROUP if module.rsplit("/", 1)[-1] in shared else module


def unit_seconds(unit: str, tests: int, known: Mapping[str, float]) -> float:
    """How long ``unit`` is expected to run: its measured seconds, else ``PER_TEST_S`` a test."""
    return known.get(unit, PER_TEST_S * tests)


def longest(units: Mapping[str, Sized], known: Mapping[str, float]) -> str:
    """The unit to start next: the longest expected (the first of equals, in collection order)."""
    return max(units, key=lambda unit: unit_seconds(unit, len(units[unit]), known))


class ModuleScheduling(LoadScopeScheduling):
    """Whole modules to whichever worker is free, longest first; the Keycloak modules as one unit."""

    def __init__(
        self, config: object, log: object | None, shared: frozenset[str], known: Mapping[str, float] = UNIT_S
    ) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._shared = shared
        self._known = known

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid, self._shared)

    def _assign_work_unit(self, node: WorkerController) -> None:
        """xdist hands out the queue's first unit: put the longest one there first."""
        self.workqueue.move_to_end(longest(self.workqueue, self._known), last=False)
        super()._assign_work_unit(node)
