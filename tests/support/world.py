"""An app on a database with one operator and two researchers, each with a grant: the starting
point of the API, UI and lane-service tests (the ``world`` fixture builds one per test)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.clock import FakeClock
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.topologies.model import Topology


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
