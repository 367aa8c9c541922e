"""Integration fixtures: fail fast and clearly when Open vSwitch is not running.

Mininet's own ovs-vsctl calls have no timeout and hang forever against a dead ovsdb-server, so
every integration test checks OVS first (`make test` starts it via scripts/ovs-up).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import keycloak
from tests.support.keycloak import Keycloak
from tests.support.ovs import ovs_problem
from tests.support.postgres import PgCluster
from tests.support.scaleout_kit import scaleout_cluster
from viplanes.config import CT_ZONE_BASE_ENV
from viplanes.lab.ctzones import claim_zone_base
from viplanes.store.db import Database

LINK_PROBE_ENV = "VIPLANES_LINK_PROBE_S"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    """``item.failed_call``: the test itself failed (fixtures print their processes' logs then)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.failed_call = True  # type: ignore[attr-defined]


@pytest.fixture(scope="session", autouse=True)
def _own_conntrack_zones() -> Iterator[None]:
    """This session's conntrack zones: a slot no other lab run or test session on the machine
    holds (viplanes/lab/ctzones.py), handed to every `viplanes serve` it starts through the
    environment. Two sessions on one vswitchd then never flush each other's connections."""
    if os.environ.get(CT_ZONE_BASE_ENV):  # given by the caller (a lab run, a CI job)
        yield
        return
    claim = claim_zone_base(f"pytest:{os.getpid()}:{time.time_ns()}")
    os.environ[CT_ZONE_BASE_ENV] = str(claim.base)
    try:
        yield
    finally:
        os.environ.pop(CT_ZONE_BASE_ENV, None)
        claim.release()


@pytest.fixture(scope="session", autouse=True)
def _no_cabling_probes_on_bare_bridges() -> Iterator[None]:
    """Most tests attach bridges that are not cabled to each other: serve's cabling probes
    (docs/dataplane.md, "Link failures") would call every declared link unseen and route no lane.
    Sessions start serve without them; the lab tests that are cabled and test the probes turn
    them on (``VIPLANES_LINK_PROBE_S``)."""
    if os.environ.get(LINK_PROBE_ENV) is not None:  # given by the caller
        yield
        return
    os.environ[LINK_PROBE_ENV] = "0"
    try:
        yield
    finally:
        os.environ.pop(LINK_PROBE_ENV, None)


@pytest.fixture(autouse=True)
def _require_ovs(request: pytest.FixtureRequest) -> None:
    if "integration" in request.keywords and "postgres" not in request.keywords:
        problem = ovs_problem()
        if problem:
            pytest.fail(problem, pytrace=False)


@pytest.fixture
def two_engines(pg_cluster: PgCluster) -> Iterator[tuple[Database, Database]]:
    """Two engines on one fresh database: two controllers contending for the lease."""
    url = pg_cluster.new_database()
    a, b = Database(url, pool_size=2), Database(url, pool_size=2)
    yield a, b
    a.dispose()
    b.dispose()


@pytest.fixture
def cluster(pg_cluster: PgCluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict]:
    """The scale-out cluster of tests/support/scaleout_kit.py on a fresh database."""
    with scaleout_cluster(pg_cluster, tmp_path, request) as running:
        yield running


@pytest.fixture(scope="session")
def keycloak_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keycloak]:
    """One Keycloak for every module that signs in against it (each module imports its own realm:
    tests.support.keycloak.realm); a start costs 14 s quiet and up to ~100 s on a loaded machine."""
    with keycloak.server(tmp_path_factory.mktemp("keycloak")) as kc:
        yield kc
