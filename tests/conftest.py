"""Shared fixtures. Integration tests are marked `integration` and need root."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import leftovers
from tests.support.paths import CAMPUS_YAML
from tests.support.postgres import PgCluster, session_cluster
from tests.support.workers import ModuleScheduling, keycloak_modules
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

SESSION_TAG = leftovers.tag_session()  # every process the tests start carries it (leftovers.py)
WATCH = leftovers.Watch(SESSION_TAG)  # a leftover named by its test is not waited for again by its module


class LeftRunning(UserWarning):
    """A test or module's thread or process outlived it (named in the session's warnings)."""


def _check_leftovers(node: pytest.Item | pytest.Module, before: leftovers.Snapshot) -> None:
    """Warn, naming ``node``, when a thread or process it started is still alive.

    A warning, not a failure: the first clean-clone run with it failing found ten, several of
    them a module's own processes restarted inside one test (a serve the module fixture stops
    later), which the per-test view cannot tell from a leak. Reported, never killed: a wrong
    guess must not take a shared server from the rest of the session."""
    found = WATCH.check(before)
    if found:
        warnings.warn(LeftRunning(f"{node.nodeid} left running: {found.describe()}"), stacklevel=1)


def _watch_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Around an integration node: what was running before, then the check after."""
    if request.node.get_closest_marker("integration") is None:
        yield
        return
    before = WATCH.snapshot()
    yield
    _check_leftovers(request.node, before)


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_nothing_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """An integration module's fixtures stop what they started (a lab, a serve, a cluster)."""
    yield from _watch_leftovers(request)


@pytest.fixture(autouse=True)
def _test_leaves_nothing_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """An integration test (or a test's PostgreSQL variant) leaves no thread or process behind:
    one left the session's last line a LISTEN retry against a cluster long stopped (CI run 47)."""
    yield from _watch_leftovers(request)


@pytest.fixture
def campus_yaml() -> Path:
    return CAMPUS_YAML


@pytest.fixture(scope="session")
def topo() -> Topology:
    """The campus topology, loaded once (tests only read it)."""
    return load_topology(CAMPUS_YAML)


@pytest.fixture
def campus_data(campus_yaml: Path) -> dict[str, Any]:
    """The campus YAML as plain data, fresh per test (tests edit it to build bad topologies)."""
    return yaml.safe_load(campus_yaml.read_text())


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's throwaway PostgreSQL cluster (skips without PostgreSQL 15 or root)."""
    with session_cluster() as cluster:
        yield cluster


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent under ``-p no:xdist``
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ModuleScheduling | None:
    """``--dist loadgroup`` (`make test`'s integration run): tests/support/workers.py's units."""
    if config.getoption("dist") != "loadgroup":
        return None
    return ModuleScheduling(config, log, keycloak_modules(Path(__file__).parent / "integration"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (CI runs as root)")
        for item in items:
            if "integration" in item.keywords:
                item.add_marker(skip)
