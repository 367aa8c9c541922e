"""Fixtures for the store, policy, authz, API and CLI tests: a fake clock, an in-memory data plane,
a temporary SQLite file per test (PostgreSQL too, for tests that take ``db_url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clock import T0, FakeClock
from tests.support.fake_switches import FakeSwitches, spec
from tests.support.live import LiveServer
from tests.support.migrated import SchemaTemplate
from tests.support.netsim import Network
from tests.support.paths import DUALSTACK_YAML, REPO
from tests.support.rawof import RawOpenFlow, ovs_bridge
from tests.support.world import World, make_world
from viplanes.controller.compile.lane import compile_base, compile_lane
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.values import LaneSpec
from viplanes.store.db import Database
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology


@pytest.fixture(autouse=True)
def gc_given_back() -> Iterator[None]:
    """Every test leaves the cyclic GC on (a thread still inside ``heap.gc_held`` would keep it
    off for the tests after it, and in serve for as long as the thread waits): say which test
    did not, rather than fail a later one that checks the GC."""
    import gc
    import time

    yield
    deadline = time.monotonic() + 2.0
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not gc.isenabled():
        gc.enable()
        pytest.fail("the cyclic GC was still off 2 s after the test: a thread inside heap.gc_held outlived it")


@pytest.fixture(scope="session", autouse=True)
def schema_migrated_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaTemplate]:
    """``create_all`` on an empty SQLite database copies a schema migrated once per worker
    (tests/support/migrated.py): the same head schema, without ~0.2 s of Alembic per test."""
    template = SchemaTemplate(tmp_path_factory.mktemp("schema"))
    migrate = Database.create_all

    def create_all(db: Database) -> None:
        if not template.fill(db):
            migrate(db)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Database, "create_all", create_all)
        yield template


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def dual() -> Topology:
    """The dual-stack campus (IPv4 and IPv6 on every subnet)."""
    return load_topology(DUALSTACK_YAML)


@pytest.fixture
def switches(topo: Topology, clock: FakeClock) -> FakeSwitches:
    """The campus's flow tables answering like OVS (``inline_runtime`` wires a runtime to them)."""
    return FakeSwitches(topo, clock)


@pytest.fixture
def dataplane() -> MemoryDataplane:
    return MemoryDataplane()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on the session's PostgreSQL cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'vl.db'}"
    return request.getfixturevalue("pg_cluster").new_database()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'vl.db'}"


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """A migrated-from-models database on ``db_url`` (SQLite and PostgreSQL)."""
    d = Database(db_url, pool_size=20)
    d.create_all()
    yield d
    d.dispose()


@pytest.fixture
def world(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, topo: Topology) -> Iterator[World]:
    w = make_world(sqlite_url, clock, dataplane, topo)
    yield w
    w.app.extensions["viplanes"].db.dispose()


@pytest.fixture
def live(world: World) -> Iterator[LiveServer]:
    server = LiveServer(world.app)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def campus_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, the controller's certificate and two switch hosts' (host1: dpids 1, 2; host3: 3)."""
    from viplanes import pki

    d = tmp_path_factory.mktemp("pki")
    pki.init(d)
    pki.issue_switch(d, "host1", [1, 2])
    pki.issue_switch(d, "host3", [3])
    return d


@pytest.fixture
def bridge() -> Iterator[tuple[str, RawOpenFlow]]:
    """A fresh userspace OVS bridge with ports 1-4 and a raw OpenFlow connection to it (root only)."""
    with ovs_bridge() as named_conn:
        yield named_conn


@pytest.fixture(scope="module")
def recorded() -> list[dict[str, Any]]:
    """The lab's recorded paper results (a JSON line per run), read once per module."""
    path = REPO / "tests" / "unit" / "fixtures" / "lab" / "paper_results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def lane() -> LaneSpec:
    """The desktop's lane to the cloud host (tcp/5201 through the NAT pool), an hour from T0."""
    return spec(7)


@pytest.fixture
def net(topo: Topology, lane: LaneSpec) -> Network:
    """The campus's simulated flow tables with the base flows and ``lane`` installed (compiled at T0)."""
    network = Network(topo)
    network.install(compile_base(topo))
    network.install(compile_lane(lane, topo, T0))
    return network
