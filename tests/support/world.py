"""An app on a database with its principals and grants: the starting point of the API, UI and
lane-service tests (the ``world`` fixture builds one per test; ``make`` the lane-set tests' one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.clock import FakeClock
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.resolver import StaticResolver
from viplanes.store import records as store
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
    from tests.support.apps import make_app
    from viplanes.store import records as store

    app = make_app({"db_url": url}, dataplane=dataplane, topology=topo, clock=clock)
    db = app.extensions["viplanes"].db
    tokens: dict[str, str] = {}
    grants: dict[str, int] = {}
    with db.write() as s:
        for name, role in (("root", "operator"), ("alice", "researcher"), ("bob", "researcher")):
            tokens[name] = store.create_principal(s, name, role, clock())[1]
        for name in ("alice", "bob"):
            grants[name] = store.create_grant(s, store.GrantInput(principal=name, **GRANT), "root", clock()).id
    return World(app, app.test_client(), clock, dataplane, tokens, grants)


NAME = "s3.cloud.example"  # the DNS name the lane-set tests resolve


def make(url: str, clock: FakeClock, plane: Any, topo: Topology, resolver: StaticResolver, **config: Any) -> World:
    """An app with ``resolver``: root, and alice with a grant wide enough for destination sets
    (IPv4 and IPv6 prefixes, port ranges); the lane-set tests' world."""
    from tests.support.apps import make_app

    app = make_app({"db_url": url, **config}, dataplane=plane, topology=topo, clock=clock, resolver=resolver)
    db = app.extensions["viplanes"].db
    tokens, grants = {}, {}
    with db.write() as s:
        for name, role in (("root", "operator"), ("alice", "researcher")):
            tokens[name] = store.create_principal(s, name, role, clock())[1]
        grant = {
            **GRANT,
            "src_prefixes": ["10.1.0.0/24", "198.51.100.30/32", "2001:db8:1::/64", "2001:db8:3::/64"],
            "dst_prefixes": ["203.0.113.0/24", "2001:db8:ff::/48"],
            "ports": [443, "5201-5210", "9000-9100", "50000-51000"],
        }
        grants["alice"] = store.create_grant(s, store.GrantInput(principal="alice", **grant), "root", clock()).id
    return World(app, app.test_client(), clock, plane, tokens, grants)


def ask(w: World, **over: Any) -> Any:
    """alice asks for a lane; ``over`` names the destination (address, prefix, name, ports)."""
    body = {"src_ip": "10.1.0.10", "protocol": "tcp", "duration_s": 600, "purpose": "transfer", **over}
    return w.client.post("/api/v1/lanes", json=body, headers=w.h("alice"))
