"""Issue 11, northbound: destination sets (address, prefix, DNS name), port ranges, IPv6, limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.paths import REPO
from tests.support.world import GRANT, NAME, World, ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.names import NameRefresher
from viplanes.lanes.resolver import StaticResolver
from viplanes.topologies.model import Topology

DUAL = REPO / "topologies" / "campus-dualstack.yaml"


@pytest.fixture
def resolver() -> StaticResolver:
    return StaticResolver({NAME: (["203.0.113.10", "203.0.113.11", "203.0.113.12", "2001:db8:ff::10"], 120.0)})


@pytest.fixture
def w(
    sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, dual: Topology, resolver: StaticResolver
) -> Iterator[World]:
    world = make(sqlite_url, clock, dataplane, dual, resolver)
    yield world
    world.app.extensions["viplanes"].db.dispose()


def test_single_lane_keeps_the_old_fields(w: World) -> None:
    r = ask(w, dst_ip="203.0.113.10", dst_port=9000)
    lane = r.get_json()
    assert r.status_code == 201 and lane["state"] == "active"
    assert lane["dst_ip"] == "203.0.113.10" and lane["dst_port"] == 9000
    assert lane["dst_nets"] == ["203.0.113.10/32"] and lane["dst_ports"] == ["9000"]
    spec = w.dataplane.active[lane["id"]]
    assert spec.dst_ip == "203.0.113.10" and spec.dst_port == 9000 and spec.is_single
    assert (
        lane["match_count"] == 1 and lane["flow_count"] == 2 * 3 + 4
    )  # 3 hops desktop -> edge, 2 ct reply + 2 commit rules


def test_port_range_counts_masked_matches(w: World) -> None:
    lane = ask(w, dst_ip="203.0.113.10", dst_ports="50000-51000").get_json()
    assert lane["state"] == "active" and lane["dst_port"] is None and lane["dst_ports"] == ["50000-51000"]
    assert lane["match_count"] == 9 and lane["flow_count"] == 9 * 2 * 3 + 4
    spec = w.dataplane.active[lane["id"]]
    assert spec.dst_ports == ((50000, 51000),) and spec.dst_ip == "203.0.113.10" and not spec.is_single


def test_port_list_and_outside_grant(w: World) -> None:
    lane = ask(w, dst_ip="203.0.113.10", dst_ports=[5201, "5202-5210", 443]).get_json()
    assert lane["dst_ports"] == ["443", "5201-5210"]
    r = ask(w, dst_ip="203.0.113.11", dst_ports="5000-5300")
    assert r.status_code == 403 and r.get_json()["error"] == "port_not_granted"
    assert "5000-5300" in r.get_json()["message"]


def test_match_limit_refuses_with_the_number(
    sqlite_url: str, clock: FakeClock, dual: Topology, resolver: StaticResolver
) -> None:
    world = make(sqlite_url, clock, MemoryDataplane(), dual, resolver, max_lane_matches=8)
    r = ask(world, dst_ip="203.0.113.10", dst_ports="50000-51000")
    body = r.get_json()
    assert r.status_code == 422 and body["error"] == "too_many_matches"
    assert body["details"] == {"match_count": 9, "limit": 8} and "9 matches" in body["message"]
    world.app.extensions["viplanes"].db.dispose()


def test_prefix_inside_and_outside(w: World) -> None:
    lane = ask(w, dst_prefix="203.0.113.128/28", dst_port=9000).get_json()
    assert lane["dst_nets"] == ["203.0.113.128/28"] and lane["dst_ip"] is None
    r = ask(w, dst_prefix="198.18.0.0/24", dst_port=9000)
    assert r.status_code == 403 and r.get_json()["error"] == "dst_not_granted"
    r = ask(w, dst_prefix="198.51.100.0/24", dst_port=9000)  # the campus's own public subnet
    assert r.status_code == 403 and r.get_json()["error"] in ("dst_lane_pool", "dst_campus")
    r = ask(w, dst_prefix="203.0.113.0/28", dst_port=9000)  # holds the edge router's outside address
    assert r.status_code == 403 and "203.0.113.1" in r.get_json()["message"]
    r = ask(w, dst_prefix="203.0.113.1/24", dst_port=9000)
    assert r.status_code == 422


def test_host_name_resolves_to_its_family_addresses(w: World, resolver: StaticResolver) -> None:
    lane = ask(w, src_ip="198.51.100.30", dst_host=NAME, dst_port=9000).get_json()
    assert lane["state"] == "active" and lane["dst_host"] == NAME
    assert lane["dst_nets"] == ["203.0.113.10/32", "203.0.113.11/32", "203.0.113.12/32", "2001:db8:ff::10/128"]
    assert lane["dst_ip"] is None and lane["match_count"] == 4
    assert w.dataplane.active[lane["id"]].dst_host == NAME


def test_v4_only_source_leaves_out_aaaa(
    sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, topo: Topology, resolver: StaticResolver
) -> None:
    world = make(sqlite_url, clock, dataplane, topo, resolver)  # campus.yaml: no host has ip6
    lane = ask(world, dst_host=NAME, dst_port=9000).get_json()
    assert lane["dst_nets"] == ["203.0.113.10/32", "203.0.113.11/32", "203.0.113.12/32"]
    assert "2001:db8:ff::10" in lane["reason"]
    world.app.extensions["viplanes"].db.dispose()


def test_name_outside_grant_is_refused_naming_addresses(w: World, resolver: StaticResolver) -> None:
    resolver.set("mixed.example", ["203.0.113.20", "198.18.5.5", "192.0.2.7"])
    r = ask(w, dst_host="mixed.example", dst_port=9000)
    assert r.status_code == 403 and r.get_json()["error"] == "dst_not_granted"
    assert "198.18.5.5" in r.get_json()["message"] and "192.0.2.7" in r.get_json()["message"]
    resolver.set("inside.example", ["10.1.0.20"])
    r = ask(w, dst_host="inside.example", dst_port=9000)
    assert r.status_code == 403 and r.get_json()["error"] == "dst_campus" and "10.1.0.20" in r.get_json()["message"]
    r = ask(w, dst_host="nowhere.example", dst_port=9000)
    assert r.status_code == 422 and r.get_json()["error"] == "dst_host_unresolvable"
    r = ask(w, dst_host="bad_name!", dst_port=9000)
    assert r.status_code == 422 and "dst_host" in r.get_json()["details"]["json"]


def test_exactly_one_destination_and_one_port_field(w: World) -> None:
    for over in (
        {"dst_ip": "203.0.113.10", "dst_host": NAME, "dst_port": 9000},
        {"dst_port": 9000},
        {"dst_ip": "203.0.113.10"},
        {"dst_ip": "203.0.113.10", "dst_port": 9000, "dst_ports": "9000-9001"},
        {"dst_ip": "203.0.113.10", "dst_ports": "9-x"},
        {"dst_ip": "203.0.113.10", "dst_ports": []},
    ):
        r = ask(w, **over)
        assert r.status_code == 422 and r.get_json()["error"] == "invalid", over


def test_overlapping_sets_are_duplicates(w: World) -> None:
    assert ask(w, dst_ip="203.0.113.20", dst_port=9050).status_code == 201
    r = ask(w, dst_prefix="203.0.113.16/28", dst_ports="9000-9100")
    assert r.status_code == 409 and r.get_json()["error"] == "duplicate_lane"
    assert ask(w, dst_prefix="203.0.113.16/28", dst_ports="5201-5210").status_code == 201
    r = ask(w, dst_ip="203.0.113.21", dst_port=5205)
    assert r.status_code == 409


def test_ipv6_lane_and_v6_refusals(w: World) -> None:
    lane = ask(w, src_ip="2001:db8:1::10", dst_ip="2001:db8:ff::10", dst_port=5201).get_json()
    assert lane["state"] == "active" and lane["nat_ip"] is None and lane["dst_ip"] == "2001:db8:ff::10"
    spec = w.dataplane.active[lane["id"]]
    assert spec.src_ip == "2001:db8:1::10" and spec.dst_nets == ("2001:db8:ff::10/128",)
    for dst, code in (
        ("ff02::1", "dst_multicast"),
        ("fe80::1", "dst_reserved"),
        ("fd00::5", "dst_campus"),
        ("2001:db8:3::30", "dst_campus"),
        ("2001:db8:ff::1", "dst_campus"),
    ):
        r = ask(w, src_ip="2001:db8:1::10", dst_ip=dst, dst_port=5202)
        assert r.status_code == 403 and r.get_json()["error"] == code, (dst, r.get_json())
    r = ask(w, src_ip="10.1.0.20", dst_ip="2001:db8:ff::10", dst_port=5201)  # server has no ip6
    assert r.status_code == 403


def test_v6_grant_prefix_refused_in_forbidden_space(w: World) -> None:
    body = {**GRANT, "principal": "alice", "dst_prefixes": ["fe80::/64"]}
    r = w.client.post("/api/v1/grants", json=body, headers=w.h("root"))
    assert r.status_code == 422, r.get_json()
    body["dst_prefixes"] = ["2001:db8:ff::/48"]
    assert w.client.post("/api/v1/grants", json=body, headers=w.h("root")).status_code == 201


def test_reresolution_follows_the_name(w: World, resolver: StaticResolver, clock: FakeClock) -> None:
    resolver.set("rot.example", ["203.0.113.50", "203.0.113.51"], 10)  # below the 30 s floor
    lane = ask(w, src_ip="198.51.100.30", dst_host="rot.example", dst_port=9000).get_json()
    refresher = NameRefresher(w.app.extensions["viplanes"].manager)
    resolver.set("rot.example", ["203.0.113.51", "203.0.113.52", "198.18.0.9"], 10)
    clock.advance(20)
    assert refresher.refresh_due() == 0  # TTL raised to the floor: not due yet
    clock.advance(11)
    assert refresher.refresh_due() == 1
    spec = w.dataplane.active[lane["id"]]
    assert spec.dst_nets == ("203.0.113.51/32", "203.0.113.52/32") and spec.lane_id == lane["id"]
    audit = w.client.get("/api/v1/audit?action=lane.destinations", headers=w.h("root")).get_json()
    assert audit[0]["decision"] == "done" and "+203.0.113.52" in audit[0]["reason"]
    assert "-203.0.113.50" in audit[0]["reason"] and "198.18.0.9" in audit[0]["reason"]
    shown = w.client.get(f"/api/v1/lanes/{lane['id']}", headers=w.h("alice")).get_json()
    assert shown["dst_nets"] == ["203.0.113.51/32", "203.0.113.52/32"]
    # unchanged answer: no audit, next refresh pushed out; a failing name keeps the set
    clock.advance(31)
    assert refresher.refresh_due() == 0
    resolver.table.pop("rot.example")
    clock.advance(31)
    assert refresher.refresh_due() == 0 and w.dataplane.active[lane["id"]].dst_nets == spec.dst_nets
    audit = w.client.get("/api/v1/audit?action=lane.resolve", headers=w.h("root")).get_json()
    assert audit and "NXDOMAIN" in audit[0]["reason"]
    # a released lane is not resolved again
    w.client.post(f"/api/v1/lanes/{lane['id']}/release", headers=w.h("alice"))
    n = len(resolver.calls)
    clock.advance(3600)
    refresher.refresh_due()
    assert len(resolver.calls) == n


def destination_audits(w: World) -> list[dict[str, Any]]:
    return w.client.get("/api/v1/audit?action=lane.destinations", headers=w.h("root")).get_json()


def test_a_name_that_grows_stays_within_the_match_budget(
    sqlite_url: str, clock: FakeClock, dual: Topology, resolver: StaticResolver
) -> None:
    """The request was refused beyond the budget; a re-resolution must not grow past it either."""
    world = make(sqlite_url, clock, MemoryDataplane(), dual, resolver, max_lane_matches=3)
    resolver.set("grow.example", ["203.0.113.60", "203.0.113.61"], 30)
    lane = ask(world, src_ip="198.51.100.30", dst_host="grow.example", dst_port=9000).get_json()
    assert lane["dst_nets"] == ["203.0.113.60/32", "203.0.113.61/32"]
    resolver.set("grow.example", [f"203.0.113.{i}" for i in range(61, 71)], 30)  # .60 gone, 9 new
    clock.advance(31)
    assert NameRefresher(world.app.extensions["viplanes"].manager).refresh_due() == 1
    kept = world.dataplane.active[lane["id"]].dst_nets
    assert kept == ("203.0.113.61/32", "203.0.113.62/32", "203.0.113.63/32")  # the old one first
    shown = world.client.get(f"/api/v1/lanes/{lane['id']}", headers=world.h("alice")).get_json()
    assert shown["dst_nets"] == list(kept) and shown["match_count"] == 3
    reason = destination_audits(world)[0]["reason"]
    assert "7 address(es) over the lane's match budget (3)" in reason and "203.0.113.64" in reason
    world.app.extensions["viplanes"].db.dispose()


def test_a_name_never_moves_a_lane_onto_another_lane(w: World, resolver: StaticResolver, clock: FakeClock) -> None:
    """Two lanes carrying one packet overwrite each other's flows: a name resolving to an address
    another live lane of the source carries must leave that address out, not take it over."""
    resolver.set("move.example", ["203.0.113.70"], 30)
    other = ask(w, src_ip="198.51.100.30", dst_ip="203.0.113.71", dst_port=9000).get_json()
    lane = ask(w, src_ip="198.51.100.30", dst_host="move.example", dst_port=9000).get_json()
    assert other["state"] == lane["state"] == "active"
    resolver.set("move.example", ["203.0.113.70", "203.0.113.71", "203.0.113.72"], 30)
    clock.advance(31)
    assert NameRefresher(w.app.extensions["viplanes"].manager).refresh_due() == 1
    assert w.dataplane.active[lane["id"]].dst_nets == ("203.0.113.70/32", "203.0.113.72/32")
    assert w.dataplane.active[other["id"]].dst_nets == ("203.0.113.71/32",)
    reason = destination_audits(w)[0]["reason"]
    assert f"203.0.113.71: lane {other['id']} of this source carries it" in reason
    # the clashing address is another lane's again: nothing changes, and the operator is told why
    w.client.post(f"/api/v1/lanes/{other['id']}/release", headers=w.h("alice"))
    again = ask(w, src_ip="198.51.100.30", dst_ip="203.0.113.71", dst_port=9000).get_json()
    clock.advance(31)
    assert NameRefresher(w.app.extensions["viplanes"].manager).refresh_due() == 0
    assert w.dataplane.active[lane["id"]].dst_nets == ("203.0.113.70/32", "203.0.113.72/32")
    audit = destination_audits(w)[0]
    assert audit["decision"] == "deny" and "no change kept" in audit["reason"]
    assert f"lane {again['id']} of this source carries it" in audit["reason"]
    # the name now resolves to that address only: the lane keeps its set (never an empty one)
    resolver.set("move.example", ["203.0.113.71"], 30)
    clock.advance(31)
    assert NameRefresher(w.app.extensions["viplanes"].manager).refresh_due() == 0
    assert w.dataplane.active[lane["id"]].dst_nets == ("203.0.113.70/32", "203.0.113.72/32")
    assert w.dataplane.active[again["id"]].dst_nets == ("203.0.113.71/32",)
    audit = destination_audits(w)[0]
    assert audit["decision"] == "deny" and "the lane keeps its set" in audit["reason"]


class RequestDuringResend(MemoryDataplane):
    """While a lane is re-sent with its new set, another request for one of the new addresses."""

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None
        self.answers: list[Any] = []

    def activate(self, spec: Any, timeout_s: float = 5.0) -> Any:
        if self.world is not None and spec.dst_host and len(spec.dst_nets) > 1:
            self.answers.append(ask(self.world, src_ip="198.51.100.30", dst_ip="203.0.113.81", dst_port=9000))
        return super().activate(spec)


def test_addresses_being_installed_are_already_claimed(
    db_url: str, clock: FakeClock, dual: Topology, resolver: StaticResolver
) -> None:
    plane = RequestDuringResend()
    world = make(db_url, clock, plane, dual, resolver)
    resolver.set("claim.example", ["203.0.113.80"], 30)
    lane = ask(world, src_ip="198.51.100.30", dst_host="claim.example", dst_port=9000).get_json()
    plane.world = world
    resolver.set("claim.example", ["203.0.113.80", "203.0.113.81"], 30)
    clock.advance(31)
    assert NameRefresher(world.app.extensions["viplanes"].manager).refresh_due() == 1
    (answer,) = plane.answers
    assert answer.status_code == 409 and answer.get_json()["error"] == "duplicate_lane"
    assert plane.active[lane["id"]].dst_nets == ("203.0.113.80/32", "203.0.113.81/32")
    world.app.extensions["viplanes"].db.dispose()


class RefusingResend(MemoryDataplane):
    def activate(self, spec: Any, timeout_s: float = 5.0) -> Any:
        if len(spec.dst_nets) > 1:
            from viplanes.domain.values import ActivationResult

            return ActivationResult(False, "switch s3 said no", 0.0)
        return super().activate(spec)


def test_a_refused_resend_gives_the_reserved_addresses_back(
    db_url: str, clock: FakeClock, dual: Topology, resolver: StaticResolver
) -> None:
    world = make(db_url, clock, RefusingResend(), dual, resolver)
    resolver.set("back.example", ["203.0.113.90"], 30)
    lane = ask(world, src_ip="198.51.100.30", dst_host="back.example", dst_port=9000).get_json()
    resolver.set("back.example", ["203.0.113.90", "203.0.113.91"], 30)
    clock.advance(31)
    assert NameRefresher(world.app.extensions["viplanes"].manager).refresh_due() == 0
    shown = world.client.get(f"/api/v1/lanes/{lane['id']}", headers=world.h("alice")).get_json()
    assert shown["dst_nets"] == ["203.0.113.90/32"]
    audit = destination_audits(world)[0]
    assert audit["decision"] == "failed" and "switch s3 said no" in audit["reason"]
    r = ask(world, src_ip="198.51.100.30", dst_ip="203.0.113.91", dst_port=9000)
    assert r.status_code == 201  # the address was given back
    world.app.extensions["viplanes"].db.dispose()


def test_plain_overlap_check_seeks_the_flow_index(w: World) -> None:
    """A source may hold thousands of plain lanes: checking one more must not walk them all."""
    import ipaddress

    from sqlalchemy import event

    from viplanes.lanes.overlap import overlapping_lane

    db = w.app.extensions["viplanes"].db
    seen: list[tuple[str, Any]] = []

    def grab(_conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM lanes" in statement:
            seen.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", grab)
    try:
        with db.write() as s:
            overlapping_lane(
                s, db, "10.1.0.10", "tcp", [ipaddress.ip_network("203.0.113.10/32")], [(9000, 9000)], None, 0, 1e10
            )
    finally:
        event.remove(db.engine, "before_cursor_execute", grab)
    assert len(seen) == 1  # the two seeks are the two arms of one UNION ALL (one round trip)
    with db.engine.connect() as conn:
        statement, params = seen[0]
        plan = [str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)]
        seeks = [step for step in plan if step.startswith(("SEARCH", "SCAN"))]
        assert len(seeks) == 2 and all("USING INDEX ix_lanes_flow" in step for step in seeks), plan
