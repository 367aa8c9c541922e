"""Issue 28 item 9: IPv6 destinations that embed an IPv4 address (NAT64, 6to4, Teredo, compatible,
SIIT) and the shared space 100.64.0.0/10 are refused, for lanes and for grants.

The attack: a grant wide enough for the internet (``::/0``, ``0.0.0.0/0``) is normal; the
researcher then names ``64:ff9b::a01:a``, which a NAT64 on the way turns into 10.1.0.10, a campus
host the IPv4 checks would have refused."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.clock import FakeClock
from tests.support.world import GRANT, NAME, World, ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.errors import Invalid
from viplanes.lanes.resolver import StaticResolver
from viplanes.policy.destinations import destination_refusal, grant_prefix_refusal, lane_net_refusal
from viplanes.store import records as store
from viplanes.topologies.model import Topology

EMBEDDING = {
    "64:ff9b::/96": "64:ff9b::a01:a",  # NAT64 of 10.1.0.10, the campus desktop
    "64:ff9b:1::/48": "64:ff9b:1::a01:a",
    "2002::/16": "2002:a01:a::1",  # 6to4 of 10.1.0.10
    "2001::/32": "2001:0:4136:e378:8000:63bf:f5fe:fff5",  # Teredo
    "::/96": "::a01:a",  # IPv4-compatible 10.1.0.10
    "::ffff:0:0:0/96": "::ffff:0:a01:a",  # SIIT translated
}


def _in(net: str) -> st.SearchStrategy[ipaddress.IPv6Address]:
    n = ipaddress.IPv6Network(net)
    lo = int(n.network_address)
    return st.integers(lo, lo + n.num_addresses - 1).map(ipaddress.IPv6Address)


@pytest.mark.parametrize("net,example", sorted(EMBEDDING.items()))
def test_each_embedding_space_is_refused(dual: Topology, net: str, example: str) -> None:
    assert destination_refusal(ipaddress.ip_address(example), dual) == (
        "dst_embeds_ipv4",
        f"destination {example} embeds an IPv4 address (NAT64, 6to4, Teredo or compatible)",
    )
    refusal = lane_net_refusal(ipaddress.ip_network(net), dual)
    assert refusal is not None and refusal[0] in ("dst_embeds_ipv4", "dst_reserved")
    grant = grant_prefix_refusal(ipaddress.ip_network(net), dual)
    assert grant is not None and grant[0] in ("dst_embeds_ipv4", "dst_reserved")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(EMBEDDING)).flatmap(_in))
def test_every_address_of_the_embedding_space_is_refused(dual: Topology, addr: ipaddress.IPv6Address) -> None:
    refusal = destination_refusal(addr, dual)
    assert refusal is not None, addr
    # :: and ::1 sit inside ::/96 and keep their older, more precise code
    assert refusal[0] == (
        "dst_reserved" if addr in (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1")) else "dst_embeds_ipv4"
    )


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(EMBEDDING)).flatmap(_in), st.integers(0, 128))
def test_no_lane_prefix_touching_the_space_is_carried(dual: Topology, addr: ipaddress.IPv6Address, plen: int) -> None:
    net = ipaddress.IPv6Network(f"{addr}/{plen}", strict=False)
    assert lane_net_refusal(net, dual) is not None, net


@settings(max_examples=300, deadline=None)
@given(st.integers(int(ipaddress.IPv4Address("100.64.0.0")), int(ipaddress.IPv4Address("100.127.255.255"))))
def test_every_shared_space_address_is_refused(dual: Topology, n: int) -> None:
    addr = ipaddress.IPv4Address(n)
    refusal = destination_refusal(addr, dual)
    assert refusal is not None and refusal[0] == "dst_shared", addr
    assert lane_net_refusal(ipaddress.IPv4Network(f"{addr}/{(n % 23) + 10}", strict=False), dual) is not None


def test_neighbours_of_the_space_stay_allowed(dual: Topology) -> None:
    for ok in ("100.63.255.255", "100.128.0.0", "2001:1::1", "2003::1", "64:ff9c::1", "2001:4860::8888"):
        assert destination_refusal(ipaddress.ip_address(ok), dual) is None, ok
    assert grant_prefix_refusal(ipaddress.ip_network("::/0"), dual) is None  # wider grants stay allowed
    assert grant_prefix_refusal(ipaddress.ip_network("0.0.0.0/0"), dual) is None


@pytest.fixture
def w(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, dual: Topology) -> Iterator[World]:
    world = make(sqlite_url, clock, dataplane, dual, StaticResolver({NAME: (["203.0.113.10"], 120.0)}))
    with world.app.extensions["viplanes"].db.write() as s:  # an operator grants the whole internet
        wide = {**GRANT, "src_prefixes": ["10.1.0.0/24", "2001:db8:1::/64"], "dst_prefixes": ["0.0.0.0/0", "::/0"]}
        store.create_grant(s, store.GrantInput(principal="alice", **wide), "root", clock())
    yield world
    world.app.extensions["viplanes"].db.dispose()


@pytest.mark.parametrize("dst", sorted(set(EMBEDDING.values()) - {"::a01:a"}) + ["::a01:a"])
def test_lane_request_to_an_embedded_v4_address_is_403(w: World, dst: str) -> None:
    r = ask(w, src_ip="2001:db8:1::10", dst_ip=dst, dst_port=9000)
    assert r.status_code == 403 and r.get_json()["error"] == "dst_embeds_ipv4", r.get_json()
    assert not w.dataplane.active


def test_lane_request_to_shared_space_is_403(w: World) -> None:
    for body in ({"dst_ip": "100.64.0.1"}, {"dst_prefix": "100.64.0.0/24"}, {"dst_prefix": "100.0.0.0/8"}):
        r = ask(w, src_ip="10.1.0.10", dst_port=9000, **body)
        assert r.status_code == 403 and r.get_json()["error"] == "dst_shared", (body, r.get_json())
    assert not w.dataplane.active
    assert ask(w, src_ip="10.1.0.10", dst_ip="100.128.0.1", dst_port=9000).status_code == 201


@pytest.mark.parametrize("prefix", ["64:ff9b::/96", "2002::/16", "2001::/32", "64:ff9b:1::/64", "100.64.0.0/10"])
def test_grant_inside_the_space_is_422_with_its_code(w: World, prefix: str) -> None:
    body = {**GRANT, "principal": "alice", "dst_prefixes": [prefix]}
    r = w.client.post("/api/v1/grants", json=body, headers=w.h("root"))
    assert r.status_code == 422 and r.get_json()["error"] == "invalid_grant", r.get_json()
    want = "dst_shared" if prefix.startswith("100.") else "dst_embeds_ipv4"
    assert r.get_json()["details"]["codes"] == [want]


def test_store_refuses_the_grant_too(w: World, dual: Topology, clock: FakeClock) -> None:
    with pytest.raises(Invalid) as err, w.app.extensions["viplanes"].db.write() as s:
        g = {**GRANT, "dst_prefixes": ["203.0.113.0/24", "2002:cb00:7100::/40"]}
        store.create_grant(s, store.GrantInput(principal="alice", **g), "root", clock(), dual)
    assert err.value.details == {
        "dst_prefixes": ["destination prefix 2002:cb00:7100::/40 lies inside IPv4-embedding space (2002::/16)"],
        "codes": ["dst_embeds_ipv4"],
    }


def test_a_dns64_answer_for_a_campus_host_is_refused(w: World) -> None:
    """A DNS64 resolver synthesises 64:ff9b::/96 answers for IPv4-only names: a name whose AAAA
    is the NAT64 form of a campus host must not open a lane to it."""
    resolver = w.app.extensions["viplanes"].manager.context.resolver
    resolver.set("sneaky.example", ["64:ff9b::a01:a", "2001:db8:ff::10"], 120)
    r = ask(w, src_ip="2001:db8:1::10", dst_host="sneaky.example", dst_port=9000)
    assert r.status_code == 403 and r.get_json()["error"] == "dst_embeds_ipv4", r.get_json()
    assert not w.dataplane.active
