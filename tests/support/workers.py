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
"""

from __future__ import annotations

from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

KEYCLOAK_GROUP = "keycloak"


def keycloak_modules(integration_dir: Path) -> frozenset[str]:
    """Test modules that use the session's Keycloak (``keycloak_server``), by file name."""
    return frozenset(
        p.name for p in integration_dir.glob("test_*.py") if "keycloak_server" in p.read_text(encoding="utf-8")
    )


def work_unit(nodeid: str, shared: frozenset[str]) -> str:
    """The unit a test is scheduled in: its module, or the Keycloak group."""
    module = nodeid.split("::", 1)[0]
    return KEYCLOAK_GROUP if module.rsplit("/", 1)[-1] in shared else module


class ModuleScheduling(LoadScopeScheduling):
    """Whole modules to whichever worker is free; the Keycloak modules as one unit."""

    def __init__(self, config: object, log: object | None, shared: frozenset[str]) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._shared = shared

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid, self._shared)
