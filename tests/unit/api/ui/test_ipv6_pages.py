"""Issue 28 item 9: every console page answers 200 whatever IPv6 prefixes grants and lanes hold.

``/ui/mine`` answered 500 for a grant with an IPv6 /32 destination: a one-address check by
``prefixlen == 32`` took the v6 /32 for a host, then sorted it as an IPv4 address. The sweep below
signs in as the operator and as the researcher and opens every GET page over grants with v4 and
v6 prefixes of many lengths and live and ended IPv6 lanes; hypothesis tries any prefix length."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.clock import FakeClock
from tests.support.ui import sign_in
from tests.support.world import GRANT, NAME, World, ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.resolver import StaticResolver
from viplanes.store import records as store
from viplanes.topologies.model import Topology

V6_DESTINATIONS = [
    "2001:db8::/32",
    "2001:db8:ff::/48",
    "2001:db8:ff::/64",
    "2001:db8:ff::10/128",
    "2001:db8:ff::10/127",
    "::/0",
    "8000::/1",
    "2600::/12",
]
V4_DESTINATIONS = ["203.0.113.10/32", "203.0.113.10/31", "0.0.0.0/0", "198.18.0.0/15"]


def _grant(w: World, clock: FakeClock, dst: list[str], src: list[str] | None = None) -> int:
    g = {**GRANT, "src_prefixes": src or ["10.1.0.0/24", "2001:db8:1::/64"], "dst_prefixes": dst}
    with w.app.extensions["viplanes"].db.write() as s:
        return store.create_grant(s, store.GrantInput(principal="alice", **g), "root", clock()).id


@pytest.fixture
def w(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, dual: Topology) -> Iterator[World]:
    world = make(sqlite_url, clock, dataplane, dual, StaticResolver({NAME: (["2001:db8:ff::10"], 120.0)}))
    yield world
    world.app.extensions["viplanes"].db.dispose()


def test_mine_with_a_v6_slash_32_destination_is_200(w: World, clock: FakeClock) -> None:
    _grant(w, clock, ["2001:db8::/32"])
    sign_in(w.client, w.tokens["alice"])
    r = w.client.get("/ui/mine")
    assert r.status_code == 200, r.text[:300]
    assert "2001:db8::/32" in r.text
    assert '<option value="2001:db8:1::10">desktop 2001:db8:1::10</option>' in r.text  # v6 sources offered


def test_mine_suggests_one_address_destinations_of_both_families(w: World, clock: FakeClock) -> None:
    gid = _grant(w, clock, ["2001:db8:ff::10/128", "203.0.113.10/32", "2001:db8::/32"])
    sign_in(w.client, w.tokens["alice"])
    page = w.client.get("/ui/mine").text
    datalist = page.split(f'id="dsts-{gid}">')[1].split("</datalist>")[0]
    # the cloud host's two addresses, IPv4 first; a v6 /32 is a prefix, not an address
    assert datalist == '<option value="203.0.113.10"><option value="2001:db8:ff::10">'


def _pages(w: World, lane_ids: list[int], grant_ids: list[int]) -> list[str]:
    fixed = ["/ui/", "/ui/mine", "/ui/grants", "/ui/lanes", "/ui/lanes/rows", "/ui/audit", "/ui/audit.csv"]
    fixed += ["/ui/principals", "/ui/switches", "/ui/drift"]
    per_lane = [p for i in lane_ids for p in (f"/ui/lanes/{i}", f"/ui/lanes/{i}/release")]
    return fixed + per_lane + [f"/ui/grants/{g}" for g in grant_ids]


def test_every_page_answers_with_v6_prefixes_of_any_length(w: World, clock: FakeClock) -> None:
    grant_ids = [_grant(w, clock, [d]) for d in V6_DESTINATIONS + V4_DESTINATIONS]
    grant_ids.append(_grant(w, clock, V6_DESTINATIONS + V4_DESTINATIONS, src=["2001:db8:1::/48", "::/0"]))
    lane_ids = []
    for body in (
        {"src_ip": "2001:db8:1::10", "dst_ip": "2001:db8:ff::10", "dst_port": 5201},
        {"src_ip": "2001:db8:1::10", "dst_prefix": "2001:db8:ff:1::/64", "dst_ports": "9000-9100"},
        {"src_ip": "2001:db8:1::10", "dst_host": NAME, "dst_port": 443},
        {"src_ip": "10.1.0.10", "dst_prefix": "203.0.113.16/28", "dst_port": 9000},
    ):
        r = ask(w, **body)
        assert r.status_code == 201, r.get_json()
        lane_ids.append(r.get_json()["id"])
    w.client.delete(f"/api/v1/lanes/{lane_ids[0]}", headers=w.h("alice"))  # one ended v6 lane
    for who in ("root", "alice"):
        w.client.post("/ui/logout") if who == "alice" else None
        sign_in(w.client, w.tokens[who])
        answers = {path: w.client.get(path) for path in _pages(w, lane_ids, grant_ids)}
        for path, r in answers.items():
            if who == "root":  # the operator sees every page
                assert r.status_code == (302 if path == "/ui/" else 200), (path, r.status_code, r.text[:300])
            elif path == "/ui/mine" or path.startswith("/ui/lanes"):  # the researcher's own pages
                assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert all(r.status_code < 500 for r in answers.values())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address),
    st.one_of(st.sampled_from([0, 1, 16, 32, 48, 64, 96, 127, 128]), st.integers(0, 128)),
)
def test_mine_answers_200_for_any_v6_prefix(w: World, clock: FakeClock, addr: ipaddress.IPv6Address, plen: int) -> None:
    net = ipaddress.IPv6Network(f"{addr}/{plen}", strict=False)
    gid = _grant(w, clock, [str(net)])
    sign_in(w.client, w.tokens["alice"])
    r = w.client.get("/ui/mine")
    assert r.status_code == 200, (str(net), r.text[:300])
    assert f"Under grant {gid}" in r.text
    with w.app.extensions["viplanes"].db.write() as s:
        store.revoke_grant(s, gid, clock())
