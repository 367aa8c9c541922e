"""Fixtures for the store, policy, authz, API and CLI tests: a fake clock, an in-memory data plane,
a temporary SQLite file per test (PostgreSQL too, for tests that take ``db_url``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest_pg import pg_cluster  # noqa: F401  (session fixture)
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

CAMPUS = Path(__file__).resolve().parents[2] / "topologies" / "campus.yaml"
T0 = 1_800_000_000.0  # a fixed "now": 2027-01-15


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


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


@pytest.fixture(scope="session")
def topo() -> Topology:
    return load_topology(CAMPUS)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


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


@dataclass
class World:
    """An app with one operator and two researchers, each researcher with one grant."""

    app: Any
    client: Any
    clock: FakeClock
    dataplane: MemoryDataplane
    tokens: dict[str, str]
    grants: dict[str, int]

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def lane(self, who: str = "alice", **over: Any) -> Any:
        body = {
            "src_ip": "10.1.0.10",
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": 9000,
            "duration_s": 600,
            "purpose": "nightly sync",
        }
        if who == "bob":
            body["src_ip"] = "10.1.0.20"
        body.update(over)
        return self.client.post("/api/v1/lanes", json=body, headers=self.h(who))


GRANT = {
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp", "udp"],
    "ports": [443, "9000-9100"],
    "max_duration_s": 3600,
    "max_lanes": 3,
}


def make_world(url: str, clock: FakeClock, dataplane: MemoryDataplane, topo: Topology) -> World:
    from viplanes.api.app import create_app
    from viplanes.store import records as store

    app = create_app({"db_url": url}, dataplane=dataplane, topology=topo, clock=clock)
    db = app.extensions["viplanes"].db
    tokens: dict[str, str] = {}
    grants: dict[str, int] = {}
    with db.write() as s:
        for name, role in (("root", "operator"), ("alice", "researcher"), ("bob", "researcher")):
            tokens[name] = store.create_principal(s, name, role, clock())[1]
        for name in ("alice", "bob"):
            grants[name] = store.create_grant(s, store.GrantInput(principal=name, **GRANT), "root", clock()).id
    return World(app, app.test_client(), clock, dataplane, tokens, grants)


@pytest.fixture
def world(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, topo: Topology) -> Iterator[World]:
    w = make_world(sqlite_url, clock, dataplane, topo)
    yield w
    w.app.extensions["viplanes"].db.dispose()


class LiveServer:
    """The app served by a real threaded waitress server on a free port, in this process."""

    def __init__(self, app: Any, threads: int = 8) -> None:
        import threading

        from waitress import create_server

        self.server = create_server(app, host="127.0.0.1", port=0, threads=threads, connection_limit=1000, backlog=1024)
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        server = self.server

        def close_all() -> None:  # runs inside the server's own loop thread: no select() race
            for channel in list(server._map.values()):  # listener, keep-alive connections, trigger
                try:
                    channel.close()
                except OSError:
                    pass
            server._map.clear()  # the run loop ends once its socket map is empty

        try:
            server.trigger.pull_trigger(close_all)
        except OSError:  # the trigger's pipe is already closed (the loop ended): close the rest here
            close_all()
        self.thread.join(5)
        server.task_dispatcher.shutdown()


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
