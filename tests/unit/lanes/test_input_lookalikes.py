"""Input that Python's parsers accept but that is not what it looks like.

``ipaddress`` takes IPv6 zone ids ("2001:db8::10%1"): the zone survives ``str()`` and hashing but
not containment, so it slipped past lookups by text (duplicate lanes) and by set (the campus
addresses) and reached the OpenFlow compiler, whose address conversion raised something other
than ValueError. ``str.isdigit`` takes "²", which ``int`` refuses: a 500 where a 4xx was due.
"""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock
from tests.support.world import World, ask, make
from viplanes.controller.compile.lane import compile_desired
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.portmasks import PortRangeError, parse_port_ranges
from viplanes.domain.values import LaneSpec, is_decimal
from viplanes.lanes.resolver import StaticResolver
from viplanes.topologies.model import Topology

DTN6 = "2001:db8:3::30"


@pytest.fixture
def plain_w(sqlite_url: str, clock: FakeClock, dual: Topology) -> World:
    return make(sqlite_url, clock, MemoryDataplane(), dual, StaticResolver({}))


@pytest.mark.parametrize(
    "field,value",
    [
        ("dst_ip", "2001:db8:ff::10%1"),
        ("dst_ip", "2001:db8:ff::1%eth0"),  # the edge router's outside leg, refused without the zone
        ("dst_prefix", "2001:db8:ff::%1/64"),
    ],
)
def test_a_zone_id_in_a_destination_is_refused(plain_w: World, field: str, value: str) -> None:
    r = ask(plain_w, src_ip=DTN6, dst_port=443, **{field: value})
    body = r.get_json()
    assert r.status_code == 422 and "zone id" in str(body["details"]), body


def test_a_zone_id_in_the_source_is_refused(plain_w: World) -> None:
    r = ask(plain_w, src_ip=DTN6 + "%1", dst_ip="2001:db8:ff::10", dst_port=443)
    assert r.status_code == 422 and "zone id" in str(r.get_json()["details"])


def test_a_zone_id_in_a_grant_prefix_is_refused(plain_w: World) -> None:
    body = {
        "principal": "alice",
        "src_prefixes": ["2001:db8:3::%1/64"],
        "dst_prefixes": ["2001:db8:ff::/48"],
        "protocols": ["tcp"],
        "ports": [443],
        "max_duration_s": 600,
        "max_lanes": 1,
    }
    r = plain_w.client.post("/api/v1/grants", json=body, headers=plain_w.h("root"))
    assert r.status_code == 422 and "zone id" in str(r.get_json()["details"])


def test_one_lane_the_compiler_cannot_build_does_not_stop_the_others(dual: Topology) -> None:
    """A row written before the API refused zone ids (or by hand) is refused alone."""
    good = LaneSpec(
        1, DTN6, None, "tcp", None, None, None, 2e9, dst_nets=("2001:db8:ff::10/128",), dst_ports=((443, 443),)
    )
    bad = LaneSpec(
        2, DTN6, None, "tcp", None, None, None, 2e9, dst_nets=("2001:db8:ff::11%1/128",), dst_ports=((443, 443),)
    )
    per_dpid, refused = compile_desired(dual, [good, bad], 1.8e9)
    assert set(refused) == {2} and "zone id" in refused[2]
    cookies = {m.cookie for msgs in per_dpid.values() for m in msgs if hasattr(m, "cookie")}
    from viplanes.controller.compile.lane import lane_cookie

    assert lane_cookie(1) in cookies and lane_cookie(2) not in cookies


def test_a_batch_with_a_lane_that_cannot_be_built_activates_the_rest(dual: Topology) -> None:
    from tests.support.clock import FakeClock
    from tests.support.fake_switches import FakeSwitches, inline_runtime

    clock = FakeClock(1.8e9)
    runtime = inline_runtime(dual, clock, FakeSwitches(dual, clock), base_flows=True)
    good = LaneSpec(1, "10.1.0.20", "203.0.113.10", "tcp", 443, None, "198.51.100.200", 1.8e9 + 600)
    bad = LaneSpec(
        2,
        DTN6,
        None,
        "tcp",
        None,
        None,
        None,
        1.8e9 + 600,
        dst_nets=("2001:db8:ff::11%1/128",),
        dst_ports=((443, 443),),
    )
    results = runtime.activate_many([bad, good])
    assert results[1].ok, results[1].reason
    assert not results[2].ok and "zone id" in results[2].reason


@pytest.mark.parametrize("ports", ["²", ["9000", "¹"], "9000-9²", "١٢"])
def test_lookalike_digits_in_ports_are_a_422(plain_w: World, ports: object) -> None:
    r = ask(plain_w, src_ip="198.51.100.30", dst_ip="203.0.113.10", dst_ports=ports)
    assert r.status_code == 422, r.get_json()
    with pytest.raises(PortRangeError):
        parse_port_ranges(ports)  # type: ignore[arg-type]


@pytest.mark.parametrize("cookie", ["².x", "¹²³.payload", "١.x"])
def test_a_session_cookie_with_lookalike_digits_is_no_session(plain_w: World, cookie: str) -> None:
    plain_w.client.set_cookie("vl_session", cookie, path="/ui")
    r = plain_w.client.get("/ui/lanes")
    assert r.status_code == 302 and "/ui/login" in r.headers["Location"]


def test_is_decimal() -> None:
    assert is_decimal("0123") and not is_decimal("") and not is_decimal("²") and not is_decimal("١٢")
    assert not is_decimal("12 ") and not is_decimal("-1")
