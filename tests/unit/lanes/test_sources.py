"""A dual-stack host is one source, whichever of its addresses a request names.

``src_ip`` names the host; a lane's packets leave from the host's address of each destination
family (an IPv4 destination from its IPv4 address, NAT'd). Before: the duplicate check, the lane
pool and the grant's source check compared the text of ``src_ip``, so the desktop asked for under
``2001:db8:1::10`` was a different source from ``10.1.0.10``: a second lane with the same IPv4
flows got through (its flows overwrite the first's on every switch, and its release deletes them),
the host got a second lane-pool address, and a grant for the host's IPv6 address alone gave an
IPv4 lane.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.world import GRANT, NAME, World, ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.names import NameRefresher
from viplanes.lanes.resolver import StaticResolver
from viplanes.store import records as store
from viplanes.topologies.model import Topology

DESKTOP4, DESKTOP6 = "10.1.0.10", "2001:db8:1::10"


@pytest.fixture
def named_w(db_url: str, clock: FakeClock, dual: Topology) -> Iterator[World]:
    resolver = StaticResolver({NAME: (["203.0.113.10", "2001:db8:ff::10"], 120.0)})
    world = make(db_url, clock, MemoryDataplane(), dual, resolver)
    yield world
    world.app.extensions["viplanes"].db.dispose()


def add_researcher(w: World, name: str, **grant: Any) -> None:
    db = w.app.extensions["viplanes"].db
    with db.write() as s:
        w.tokens[name] = store.create_principal(s, name, "researcher", w.clock())[1]
        w.grants[name] = store.create_grant(
            s, store.GrantInput(principal=name, **{**GRANT, **grant}), "root", w.clock()
        ).id


def ask_as(w: World, who: str, **body: Any) -> Any:
    return w.client.post(
        "/api/v1/lanes", json={"protocol": "tcp", "duration_s": 600, "purpose": "t", **body}, headers=w.h(who)
    )


def test_the_same_flow_under_the_hosts_other_address_is_a_duplicate(named_w: World) -> None:
    add_researcher(
        named_w,
        "bob",
        src_prefixes=[f"{DESKTOP4}/32", f"{DESKTOP6}/128"],
        dst_prefixes=["203.0.113.0/24", "2001:db8:ff::/48"],
    )
    alice = ask(named_w, src_ip=DESKTOP4, dst_ip="203.0.113.10", dst_port=9001).get_json()
    assert alice["state"] == "active"
    r = ask_as(named_w, "bob", src_ip=DESKTOP6, dst_ip="203.0.113.10", dst_port=9001)
    assert r.status_code == 409 and r.get_json()["error"] == "duplicate_lane"
    # and the other way round, for an IPv6 flow
    v6 = ask_as(named_w, "bob", src_ip=DESKTOP6, dst_ip="2001:db8:ff::10", dst_port=9002).get_json()
    assert v6["state"] == "active" and v6["src_ip"] == DESKTOP6  # stored as the address it leaves from
    r = ask(named_w, src_ip=DESKTOP4, dst_ip="2001:db8:ff::10", dst_port=9002)
    assert r.status_code == 409 and r.get_json()["error"] == "duplicate_lane"


def test_a_name_of_both_families_overlaps_a_lane_of_either(named_w: World) -> None:
    v6 = ask(named_w, src_ip=DESKTOP6, dst_ip="2001:db8:ff::10", dst_port=9000).get_json()
    assert v6["state"] == "active"
    r = ask(named_w, src_ip=DESKTOP4, dst_host=NAME, dst_port=9000)  # its AAAA is that lane's address
    assert r.status_code == 409 and r.get_json()["error"] == "duplicate_lane"


def test_a_grant_for_the_v6_address_alone_gives_no_v4_lane(named_w: World) -> None:
    add_researcher(
        named_w, "bob", src_prefixes=[f"{DESKTOP6}/128"], dst_prefixes=["203.0.113.0/24", "2001:db8:ff::/48"]
    )
    r = ask_as(named_w, "bob", src_ip=DESKTOP6, dst_ip="203.0.113.11", dst_port=9001)
    body = r.get_json()
    assert r.status_code == 403 and body["error"] == "src_not_granted" and DESKTOP4 in body["message"]
    ok = ask_as(named_w, "bob", src_ip=DESKTOP6, dst_ip="2001:db8:ff::11", dst_port=9001)
    assert ok.status_code == 201


def test_one_lane_pool_address_per_host_whichever_address_named_it(named_w: World) -> None:
    first = ask(named_w, src_ip=DESKTOP4, dst_ip="203.0.113.10", dst_port=5201).get_json()
    second = ask(named_w, src_ip=DESKTOP6, dst_ip="203.0.113.10", dst_port=5202).get_json()
    assert first["nat_ip"] is not None and second["nat_ip"] == first["nat_ip"]
    assert second["src_ip"] == DESKTOP4  # an IPv4 lane leaves from the IPv4 address


def test_a_name_gains_no_address_whose_source_the_grant_lacks(db_url: str, clock: FakeClock, dual: Topology) -> None:
    resolver = StaticResolver({"v4.example": (["203.0.113.40"], 30.0)})
    world = make(db_url, clock, MemoryDataplane(), dual, resolver)
    add_researcher(world, "bob", src_prefixes=[f"{DESKTOP4}/32"], dst_prefixes=["203.0.113.0/24", "2001:db8:ff::/48"])
    lane = ask_as(world, "bob", src_ip=DESKTOP4, dst_host="v4.example", dst_port=9001).get_json()
    assert lane["state"] == "active"
    resolver.set("v4.example", ["203.0.113.41", "2001:db8:ff::40"], 30)  # moved, and an AAAA too
    clock.advance(31)
    assert NameRefresher(world.app.extensions["viplanes"].manager).refresh_due() == 1
    assert world.dataplane.active[lane["id"]].dst_nets == ("203.0.113.41/32",)
    audit = world.client.get("/api/v1/audit?action=lane.destinations", headers=world.h("root")).get_json()
    assert f"source {DESKTOP6} is outside grant" in audit[0]["reason"]
    world.app.extensions["viplanes"].db.dispose()
